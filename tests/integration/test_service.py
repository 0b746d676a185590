"""The whole embedded profile in one process, through the HTTP API."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import bootstrap
from adapters.memory import HashingEmbedder
from adapters.settings import Settings
from api.app import create_app

pytestmark = pytest.mark.integration


@pytest.fixture
def service(tmp_path):
    settings = Settings(UPSTREAM_DATA_DIR=tmp_path / "data")  # type: ignore[call-arg]
    container = bootstrap(settings, "serve", embedder=HashingEmbedder())
    with TestClient(create_app(container=container)) as client:
        client.container = container  # type: ignore[attr-defined]
        yield client


def _files(n: int, prefix: str = "models/m") -> list[dict[str, str]]:
    return [
        {"path": f"{prefix}{i}.sql", "content": f"select col_{i} from table_{i}"} for i in range(n)
    ]


def test_ingest_with_wait_is_searchable_at_once_and_health_shows_no_lag(service):
    files = [*_files(30), {"path": "docs/x.md", "content": "the purple elephant ledger"}]
    reply = service.post("/api/v1/ingest?wait=true", json={"project_id": "demo", "files": files})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["waited"] and body["changed"] == 31 and body["refused"] == 0

    hits = service.post("/api/v1/search", json={"query": "purple elephant", "project_id": "demo"})
    top = hits.json()["hits"][0]
    assert top["path"] == "docs/x.md"
    assert top["urn"] == "urn:li:chunk:demo:docs/x.md#0"
    assert (top["line_start"], top["line_end"]) == (1, 1)

    health = service.get("/health").json()
    assert health["profile"] == "embedded"
    assert health["components"]["projections"]["vectors"]["lag"] == 0
    assert health["components"]["relay"]["lag"] == 0
    assert health["components"]["event_store"]["position"] == body["position"]


def test_reingesting_unchanged_files_records_nothing(service):
    first = service.post("/api/v1/ingest?wait=true", json={"files": _files(5)}).json()
    again = service.post("/api/v1/ingest?wait=true", json={"files": _files(5)}).json()
    assert again["changed"] == 0 and again["accepted"] == 5
    assert again["position"] == first["position"]


def test_a_refused_file_gets_its_reason_and_the_others_are_kept(service):
    files = [*_files(2), {"path": "", "content": "x"}, {"path": "b.bin", "content": "a\x00b"}]
    reply = service.post("/api/v1/ingest?wait=true", json={"files": files})
    assert reply.status_code == 207
    refused = {f["path"]: f["error"] for f in reply.json()["files"] if not f["accepted"]}
    assert refused[""]["code"] == "empty_path" and refused[""]["hint"]
    assert refused["b.bin"]["code"] == "binary_content"
    assert service.get("/health").json()["components"]["vector_store"]["points"] == 2


def test_all_files_refused_is_422_and_stores_nothing(service):
    head = service.get("/health").json()["components"]["event_store"]["position"]
    reply = service.post("/api/v1/ingest", json={"files": [{"path": "../x", "content": "y"}]})
    assert reply.status_code == 422
    assert reply.json()["files"][0]["error"]["code"] == "invalid_path"
    assert service.get("/health").json()["components"]["event_store"]["position"] == head


def test_a_malformed_request_is_a_clear_422(service):
    reply = service.post("/api/v1/ingest", json={"files": [{"content": "no path"}]})
    assert reply.status_code == 422
    body = reply.json()
    assert body["error"] == "invalid_request" and "files.0.path" in body["message"]
    bad = service.post("/api/v1/search", json={"query": ""})
    assert bad.status_code == 422 and "query" in bad.json()["message"]


def test_replay_through_the_api_rebuilds_the_same_read_model(service):
    service.post("/api/v1/ingest?wait=true", json={"files": _files(10)})
    container = service.container
    live = container.index.dump()

    reply = service.post("/api/v1/replay", json={"projection": "vectors"})

    head = container.app.max_position()
    assert reply.status_code == 200 and reply.json()["replayed"] == {"vectors": head}
    assert container.index.dump() == live
    unknown = service.post("/api/v1/replay", json={"projection": "nope"})
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_projection"


def test_tenants_see_only_their_own_chunks(service):
    for tenant in ("acme", "globex"):
        body = {"tenant_id": tenant, "files": [{"path": "s.sql", "content": f"{tenant} secret"}]}
        service.post("/api/v1/ingest?wait=true", json=body)
    hits = service.post("/api/v1/search", json={"query": "secret", "tenant_id": "acme"}).json()
    assert [h["snippet"] for h in hits["hits"]] == ["acme secret"]


def test_metrics_are_prometheus_text_with_lag_and_progress(service):
    service.post("/api/v1/ingest?wait=true", json={"files": _files(3)})
    service.post("/api/v1/search", json={"query": "col_1"})
    reply = service.get("/metrics")
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    text = reply.text
    head = service.get("/health").json()["components"]["event_store"]["position"]
    assert f"upstream_event_store_position {head}.0" in text
    assert 'upstream_projection_lag_events{projection="vectors"} 0.0' in text
    assert 'upstream_projection_applied_total{projection="vectors"}' in text
    assert f"upstream_relay_published_total {head}.0" in text
    assert "upstream_search_seconds_count 1.0" in text


@pytest.mark.spec("LLM-09.1", "LLM-09.2")
def test_search_filters_by_file_path_and_chunk_type_and_says_so(service):
    files = [
        {"path": "views.sql", "content": "create view revenue_v as select amount from orders;"},
        {"path": "load.py", "content": "def load_revenue():\n    return 'amount from orders'\n"},
    ]
    service.post("/api/v1/ingest?wait=true", json={"project_id": "f", "files": files})

    by_path = service.post(
        "/api/v1/search", json={"query": "revenue amount", "project_id": "f", "path": "load.py"}
    ).json()
    assert {h["path"] for h in by_path["hits"]} == {"load.py"}
    assert by_path["filters"] == {"project_id": "f", "path": "load.py"}

    by_type = service.post(
        "/api/v1/search",
        json={"query": "revenue amount", "project_id": "f", "chunk_type": "sql_view"},
    ).json()
    assert [h["chunk_type"] for h in by_type["hits"]] == ["sql_view"]
    assert by_type["filters"]["chunk_type"] == "sql_view"


def test_a_fresh_service_seeds_the_local_profile_so_it_answers_offline(service):
    """No OpenRouter key and no Ollama: every chat chain ends with the extractive provider."""
    container = service.container
    asyncio.run(container.wait_for(container.app.max_position()))
    for usage in ("chat_deep", "chat_graph", "chat_semantic", "chat_text", "chat_title"):
        reply = service.get("/api/v1/models/config", params={"usage_type": usage}).json()
        chain = sorted(reply["configs"], key=lambda c: c["priority"])
        assert chain and chain[-1]["provider"] == "extractive", usage
    again = service.post("/api/v1/models/config/seed", json={})
    assert again.status_code == 409  # seeded once; a restart does not seed twice
