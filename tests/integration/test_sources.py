"""Git (against a real `git daemon` on 127.0.0.1) and upload sources, through the HTTP API."""

from __future__ import annotations

import io
import subprocess
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import bootstrap
from adapters.memory import HashingEmbedder
from adapters.settings import Settings
from api.app import create_app
from bus.nats_server import free_port

pytestmark = pytest.mark.integration


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    work = tmp_path / "work"
    (work / "models").mkdir(parents=True)
    (work / "node_modules/x").mkdir(parents=True)
    (work / "models/a.sql").write_text("select id from raw.a")
    (work / "models/b.sql").write_text("select id from raw.b")
    (work / "notes.md").write_text("# notes")
    (work / "logo.png").write_bytes(b"\x89PNG\x00\x00binary")
    (work / "node_modules/x/lib.js").write_text("vendored")
    (work / "ignored.log").write_text("should not be tracked")
    (work / ".gitignore").write_text("*.log\n")
    _git(work, "init", "-q", "-b", "main")
    _git(work, "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    _git(work, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    bare = tmp_path / "srv" / "shop.git"
    bare.parent.mkdir()
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return work


@pytest.fixture
def git_daemon(repo, tmp_path):
    port = free_port()
    base = tmp_path / "srv"
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            f"--base-path={base}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(base),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"git://127.0.0.1:{port}/shop.git"
    for _ in range(100):
        if subprocess.run(["git", "ls-remote", url], capture_output=True).returncode == 0:
            break
        time.sleep(0.05)
    yield url
    daemon.terminate()
    daemon.wait()


@pytest.fixture
def service(tmp_path):
    settings = Settings(UPSTREAM_DATA_DIR=tmp_path / "data")  # type: ignore[call-arg]
    container = bootstrap(settings, "serve", embedder=HashingEmbedder())
    with TestClient(create_app(container=container)) as client:
        client.container = container  # type: ignore[attr-defined]
        yield client


def _paths(service, project: str) -> list[str]:
    hits = service.post(
        "/api/v1/search", json={"query": "select id notes", "project_id": project, "top_k": 50}
    ).json()["hits"]
    return sorted({h["path"] for h in hits})


def test_git_ingest_takes_tracked_text_files_and_records_the_commit(service, git_daemon, repo):
    body = {"url": git_daemon, "project_id": "shop"}
    reply = service.post("/api/v1/github/ingest?wait=true", json=body)

    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert result["commit"] == _git(repo, "rev-parse", "HEAD")
    assert result["changed"] == 4  # .gitignore, a.sql, b.sql, notes.md
    assert [s["path"] for s in result["skipped"]] == ["logo.png"]
    assert _paths(service, "shop") == [".gitignore", "models/a.sql", "models/b.sql", "notes.md"]


def test_git_reingest_after_a_deletion_deletes_that_file(service, git_daemon, repo):
    service.post("/api/v1/github/ingest?wait=true", json={"url": git_daemon, "project_id": "s"})
    _git(repo, "rm", "-q", "models/b.sql")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "two")
    _git(repo, "push", "-q", str(Path(repo).parent / "srv" / "shop.git"), "main")

    again = service.post(
        "/api/v1/github/ingest?wait=true", json={"url": git_daemon, "project_id": "s"}
    ).json()

    assert again["deleted"] == ["models/b.sql"]
    assert again["changed"] == 0 and again["unchanged"] == 3
    assert "models/b.sql" not in _paths(service, "s")


def test_git_include_and_exclude_patterns(service, git_daemon):
    body = {"url": git_daemon, "project_id": "p", "include": ["models/*"], "exclude": ["*b.sql"]}
    result = service.post("/api/v1/github/ingest?wait=true", json=body).json()
    assert result["files"] == 1 and _paths(service, "p") == ["models/a.sql"]


def test_local_and_odd_urls_are_refused_unless_allowed(service, repo):
    for url in (f"file://{repo}", str(repo), "ftp://x/y", "--upload-pack=touch /tmp/x"):
        reply = service.post("/api/v1/github/ingest", json={"url": url})
        assert reply.status_code == 400, url
        assert reply.json()["error"] == "git_source_refused"


def test_an_unreachable_repository_is_a_clear_error(service):
    reply = service.post("/api/v1/github/ingest", json={"url": f"git://127.0.0.1:{free_port()}/x"})
    assert reply.status_code == 502
    assert reply.json()["error"] == "git_clone_failed" and reply.json()["hint"]


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_upload_of_plain_files_and_a_zip(service):
    archive = _zip({"repo/m.sql": b"select 1", "../evil.sql": b"x", "repo/bin.dat": b"\x00\x01"})
    reply = service.post(
        "/api/v1/files/upload?wait=true",
        data={"project_id": "up"},
        files=[("files", ("repo.zip", archive, "application/zip"))],
    )
    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert result["changed"] == 1
    assert sorted(s["reason"] for s in result["skipped"]) == ["binary", "unsafe path"]

    plain = service.post(
        "/api/v1/files/upload?wait=true",
        data={"project_id": "up"},
        files=[("files", ("notes.md", b"# hello", "text/markdown"))],
    )
    assert plain.json()["changed"] == 1
    assert _paths(service, "up") == ["notes.md", "repo/m.sql"]


def test_a_zip_bomb_is_refused_and_nothing_is_stored(service):
    bomb = _zip({"a.sql": b"0" * 50_000_000})
    reply = service.post(
        "/api/v1/files/upload", files=[("files", ("bomb.zip", bomb, "application/zip"))]
    )
    assert reply.status_code == 400
    assert reply.json()["error"] == "archive_refused" and "bomb" in reply.json()["message"]


def test_a_tar_with_links_is_read_without_following_them(service):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = b"select 2"
        info = tarfile.TarInfo("m.sql")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("passwd")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        archive.addfile(link)
    reply = service.post(
        "/api/v1/files/upload?wait=true",
        files=[("files", ("r.tar.gz", buffer.getvalue(), "application/gzip"))],
    )
    result = reply.json()
    assert result["changed"] == 1
    assert result["skipped"] == [{"path": "passwd", "reason": "links and devices are not ingested"}]


@pytest.mark.spec("LLM-14.1", "LLM-03.2")
def test_every_source_chunks_semantically_and_keeps_the_metadata(service, git_daemon):
    sql = "create view v_orders as select id, amount from raw.orders;"
    service.post(
        "/api/v1/ingest?wait=true",
        json={"project_id": "m", "source": "api", "files": [{"path": "json.sql", "content": sql}]},
    )
    service.post(
        "/api/v1/files/upload?wait=true",
        data={"project_id": "m"},
        files=[("files", ("up.sql", sql.encode(), "text/plain"))],
    )
    service.post("/api/v1/github/ingest?wait=true", json={"url": git_daemon, "project_id": "m"})

    points = {p.payload["path"]: p.payload for p in service.container.index.dump()}
    expected_sources = {"json.sql": "api", "up.sql": "upload", "models/a.sql": git_daemon}
    for path, source in expected_sources.items():
        payload = points[path]
        assert payload["file_path"] == payload["relative_path"] == path
        assert payload["chunk_type"].startswith("sql_")
        assert payload["source"] == source
        assert payload["project_id"] == "m"
        assert payload["repository_id"]
    assert points["json.sql"]["chunk_type"] == "sql_view"
    assert points["json.sql"]["tables"] == ["raw.orders", "v_orders"]
    assert set(points["json.sql"]["columns"]) >= {"id", "amount"}


@pytest.mark.spec("LLM-25.1")
def test_evidence_ids_are_urns_of_entity_type_project_and_asset_path(service):
    body = {
        "project_id": "u",
        "files": [{"path": "m/v.sql", "content": "create view v as select a from s"}],
    }
    service.post("/api/v1/ingest?wait=true", json=body)
    hit = service.post("/api/v1/search", json={"query": "view", "project_id": "u"}).json()["hits"][
        0
    ]
    assert hit["urn"] == "urn:li:chunk:u:m/v.sql#0"
    assert hit["file_urn"] == "urn:li:file:u:m/v.sql"
    lineage = service.get("/api/v1/lineage/v/upstream", params={"project_id": "u"}).json()
    assert lineage["start"]["urn"] == "urn:li:dataset:u:v"
    assert {e["target"] for e in lineage["edges"]} == {"urn:li:dataset:u:s"}
