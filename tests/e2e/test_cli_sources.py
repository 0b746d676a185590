"""The CLI against a running service: --sync retracts deleted files; a git URL is cloned."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.service import ServeProcess
from bus.nats_server import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

UPSTREAM = str(Path(sys.executable).parent / "upstream")


def _cli(url: str, *args: str) -> dict:
    done = subprocess.run(
        [UPSTREAM, *args, "--api-url", url, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    server = ServeProcess(tmp_path_factory.mktemp("svc") / "data")
    server.start()
    yield server.url
    server.stop()


@pytest.mark.spec("LLM-14.1")
def test_ingest_sync_retracts_files_deleted_locally(service, tmp_path):
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "models/a.sql").write_text("create view a as select x from raw.t")
    (repo / "models/b.sql").write_text("create view b as select x from a")
    first = _cli(service, "ingest", str(repo), "--project", "sync", "--sync", "--wait")
    assert first["changed"] == 2 and first["deleted"] == []

    (repo / "models/b.sql").unlink()
    second = _cli(service, "ingest", str(repo), "--project", "sync", "--sync", "--wait")

    assert second["deleted"] == ["models/b.sql"]
    downstream = _cli(service, "lineage", "downstream", "a", "--project", "sync")
    assert downstream["nodes"] == []  # b no longer reads from a
    hits = _cli(service, "search", "create view", "--project", "sync")["hits"]
    assert {h["path"] for h in hits} == {"models/a.sql"}
    assert all(h["urn"].startswith("urn:li:chunk:sync:models/") for h in hits)


def test_ingest_of_a_git_url_clones_on_the_server(service, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "m.sql").write_text("create view m as select 1 as one")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "one"]):
        subprocess.run(
            ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
            cwd=work,
            check=True,
            capture_output=True,
        )
    bare = tmp_path / "srv" / "r.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    port = free_port()
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            f"--base-path={bare.parent}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(bare.parent),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"git://127.0.0.1:{port}/r.git"
        for _ in range(100):
            if subprocess.run(["git", "ls-remote", url], capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        result = _cli(service, "ingest", url, "--project", "git", "--wait")
    finally:
        daemon.terminate()
        daemon.wait()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, capture_output=True, text=True)
    assert result["commit"] == head.stdout.strip()
    assert result["changed"] == 1
