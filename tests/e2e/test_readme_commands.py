"""The README's first command on a fresh data dir, then the CLI as a newcomer uses it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bench.corpus import generate
from bus.nats_server import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = str(Path(sys.executable).parent / "upstream")


def _wait_healthy(url: str, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "make run exited early"
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise AssertionError("the service did not become healthy")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.spec("LLM-03.1", "LLM-33.1")
def test_make_run_serves_and_the_cli_ingests_200_files_and_finds_a_phrase(tmp_path):
    port = free_port()
    env = {**os.environ, "UPSTREAM_PORT": str(port), "UPSTREAM_DATA_DIR": str(tmp_path / "data")}
    for var in ("NATS_URL", "QDRANT_URL", "PERSISTENCE_MODULE", "REDIS_URL"):
        env.pop(var, None)
    log = (tmp_path / "make-run.log").open("wb")
    process = subprocess.Popen(
        ["make", "run"], cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process)
        needles = generate(tmp_path / "repo", files=200)

        ingest = subprocess.run(
            [UPSTREAM, "ingest", str(tmp_path / "repo"), "--project", "demo", "--wait", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=True,
        )
        summary = json.loads(ingest.stdout)
        assert summary["files"] == 200 and summary["refused"] == 0

        health = httpx.get(f"{url}/health").json()
        assert health["components"]["projections"]["vectors"]["lag"] == 0

        for needle in needles:
            found = subprocess.run(
                [UPSTREAM, "search", needle.phrase, "--project", "demo", "--json"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            assert json.loads(found.stdout)["hits"][0]["path"] == needle.path

        needle = needles[0]
        asked = subprocess.run(
            [UPSTREAM, "ask", needle.phrase, "--intent", "semantic", "-p", "demo", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        answer = json.loads(asked.stdout)
        assert needle.path in " ".join(e["id"] for e in answer["evidence"])
        assert answer["model"] == "extractive"  # the offline `local` seed profile answers
        streamed = subprocess.run(
            [UPSTREAM, "ask", needle.phrase, "--intent", "semantic", "-p", "demo", "--stream"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert "evidence:" in streamed.stdout and needle.path in streamed.stdout

        again = subprocess.run(
            [UPSTREAM, "ingest", str(tmp_path / "repo"), "--project", "demo", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        assert json.loads(again.stdout)["changed"] == 0
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    deadline = time.monotonic() + 15
    while _group_alive(process.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _group_alive(process.pid), "a process (e.g. nats-server) outlived the service"
