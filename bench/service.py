"""Running `upstream serve` as a child process, for checks that kill and restart it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bus.nats_server import free_port


class ServeProcess:
    """`upstream serve` on a data dir and a free port; logs go to `<data_dir>/serve.log`."""

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "UPSTREAM_DATA_DIR": str(self.data_dir),
            "UPSTREAM_PORT": str(self.port),
        }
        for server_var in ("NATS_URL", "QDRANT_URL", "PERSISTENCE_MODULE"):
            env.pop(server_var, None)
        log = (self.data_dir / "serve.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "serve"], env=env, stdout=log, stderr=log
        )
        self._wait_healthy(timeout)

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"upstream serve exited; see {self.data_dir / 'serve.log'}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"upstream serve not healthy within {timeout:.0f} s")

    def nats_pid(self) -> int | None:
        pid_file = self.data_dir / "nats" / "nats-server.pid"
        return int(pid_file.read_text().strip()) if pid_file.exists() else None

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout: float = 30.0) -> int:
        if self.process is None:
            return 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")
