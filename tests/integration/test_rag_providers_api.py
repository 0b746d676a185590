"""RAG providers through the HTTP API (rag-providers.md, PRV-01, PRV-02, PRV-09.7, PRV-12.3,
PRV-14): two whole upstream services on real ports, A (no cross-encoder) whose connections
reach B (a real cross-encoder) over HTTP, A itself, a closed port, and a scripted HTTP server
on 127.0.0.1 that answers what a test tells it (errors, slowness) and records what it got."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel

from adapters.bootstrap import bootstrap
from adapters.memory import HashingEmbedder
from adapters.rag.connections import build_rag_connections
from adapters.rag.upstream_http import UpstreamHttpRagProvider
from adapters.settings import Settings
from api.app import create_app
from api.errors import install_error_handlers
from api.routes import providers as provider_routes
from bus.nats_server import free_port
from domain import rag_provider
from domain.rag_provider import Capability, ProviderHealth, RagProvider
from tests.cross_encoder_model import build_cross_encoder

pytestmark = pytest.mark.integration

QUERY = "which model computes net revenue?"
CAPABILITIES = {"collections", "search", "embeddings", "metadata_filtering", "rerank"}


# -- servers ----------------------------------------------------------------------------------
@contextlib.contextmanager
def served(settings: Settings, port: int) -> Iterator[str]:
    """The whole service on 127.0.0.1:`port` (uvicorn in a thread), until the block ends."""
    container = bootstrap(settings, "serve", embedder=HashingEmbedder())
    config = uvicorn.Config(
        create_app(container=container), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "service did not start"
        time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(30)


class Scripted:
    """Answers per path from a script (status, body, delay), recording every request."""

    def __init__(self) -> None:
        self.script: dict[str, list[tuple[int, Any, float]]] = {}
        self.requests: list[dict[str, Any]] = []
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, *replies: tuple[int, Any, float]) -> None:
        self.script[path] = list(replies)
        self.requests.clear()

    def seen(self, path: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"] == path]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._reply()

            def do_POST(self) -> None:
                self._reply()

            def _reply(self) -> None:
                path = self.path.split("?")[0]
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                scripted.requests.append(
                    {"path": path, "headers": dict(self.headers), "body": body}
                )
                replies = scripted.script.get(path) or [(404, {"message": "no script"}, 0.0)]
                status, answer, delay = replies.pop(0) if len(replies) > 1 else replies[0]
                time.sleep(delay)
                data = json.dumps(answer).encode()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


HEALTH_WITH_MODEL = (200, {"status": "ok", "cross_encoder": {"model": "m", "status": "loaded"}}, 0)


@pytest.fixture(scope="module")
def scripted() -> Iterator[Scripted]:
    server = Scripted()
    yield server
    server.server.shutdown()


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Service B: a real cross-encoder loaded from a folder."""
    root = tmp_path_factory.mktemp("remote")
    model = build_cross_encoder(root / "model")
    settings = Settings(UPSTREAM_DATA_DIR=root / "data", CROSS_ENCODER_PATH=str(model))
    with served(settings, free_port()) as url:
        yield url


@pytest.fixture(scope="module")
def local(
    tmp_path_factory: pytest.TempPathFactory, remote: str, scripted: Scripted
) -> Iterator[httpx.Client]:
    """Service A: no cross-encoder; its connections reach B, A itself, a closed port and the
    scripted server."""
    port = free_port()
    connections = {
        "upstream_http": {"base_url": remote, "api_key": "b-secret"},
        "self_http": {"provider": "upstream_http", "base_url": f"http://127.0.0.1:{port}"},
        "offline": {
            "provider": "upstream_http",
            "base_url": f"http://127.0.0.1:{free_port()}",
            "retries": 1,
            "retry_backoff_s": 0,
        },
        "scripted": {
            "provider": "upstream_http",
            "base_url": scripted.url,
            "api_key": "s3cret",
            "tenant_id": "acme",
            "retries": 2,
            "retry_backoff_s": 0.01,
        },
        "slow": {
            "provider": "upstream_http",
            "base_url": scripted.url,
            "timeout_s": 0.5,
            "retries": 0,
        },
    }
    with contextlib.ExitStack() as stack:
        with pytest.MonkeyPatch.context() as env:  # read once, by bootstrap
            env.setenv("UPSTREAM_RAG_PROVIDERS", json.dumps(connections))
            env.delenv("CROSS_ENCODER_MODEL", raising=False)
            env.delenv("CROSS_ENCODER_PATH", raising=False)
            settings = Settings(UPSTREAM_DATA_DIR=tmp_path_factory.mktemp("local") / "data")
            url = stack.enter_context(served(settings, port))
        yield stack.enter_context(httpx.Client(base_url=url, timeout=60))


def _documents() -> list[dict[str, Any]]:
    texts = [
        "net_revenue is payments minus refunds, computed in fct_orders",
        "a recipe for lemon cake",
        "customer_summary sums net revenue per customer",
        "Kubernetes runs two API replicas",
    ]
    return [
        {"id": f"d{i}", "text": t, "score": 0.9 - i / 10, "metadata": {"path": f"p{i}.sql"}}
        for i, t in enumerate(texts)
    ]


def _create(url: str, name: str, count: int, metadata: dict[str, Any] | None = None) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        created = client.post("/collections?wait=true", json={"name": name, "metadata": metadata})
        assert created.status_code == 201, created.text
        documents = [
            {"id": f"{name}-{i}", "text": f"text {i}", "embedding": [1.0, float(i), 0.5]}
            for i in range(count)
        ]
        added = client.post(
            f"/collections/{name}/documents?wait=true", json={"documents": documents}
        )
        assert added.status_code == 200, added.text


# -- registry: registration, discovery, selection ----------------------------------------------
@pytest.mark.spec("PRV-01.1")
def test_a_new_provider_registers_itself_and_becomes_discoverable():
    class EchoConfig(BaseModel):
        greeting: str = "hello"

    class EchoProvider(RagProvider):
        name = "echo_test"
        description = "answers from memory"
        config_model = EchoConfig
        capabilities = frozenset({Capability.SEARCH})

        async def health_check(self) -> ProviderHealth:
            return ProviderHealth.checked("healthy", {"greeting": self.config.greeting})

    try:
        web = FastAPI()
        install_error_handlers(web)
        web.include_router(provider_routes.router)
        web.state.container = SimpleNamespace(rag_providers=build_rag_connections(None))
        with TestClient(web) as client:
            listed = {p["name"]: p for p in client.get("/api/v1/providers").json()["providers"]}
            assert {"echo_test", "builtin", "upstream_http"} <= set(listed)
            assert listed["echo_test"]["capabilities"]["search"] is True
            assert listed["echo_test"]["capabilities"]["collections"] is False
            health = client.get("/api/v1/providers/echo_test/health").json()
            assert health["details"] == {"greeting": "hello"}
    finally:
        rag_provider._DISCOVERED.pop("echo_test", None)


@pytest.mark.spec("PRV-01.2", "PRV-02.2")
def test_discovery_lists_every_provider_with_its_capabilities(local):
    reply = local.get("/api/v1/providers").json()
    providers = {p["name"]: p for p in reply["providers"]}
    assert {"builtin", "upstream_http"} <= set(providers)
    for provider in providers.values():
        assert set(provider["capabilities"]) == CAPABILITIES  # one flag per operation
        assert all(isinstance(v, bool) for v in provider["capabilities"].values())
        assert provider["config_schema"]["type"] == "object"
    assert all(providers["builtin"]["capabilities"].values())
    remote_flags = providers["upstream_http"]["capabilities"]
    assert remote_flags["embeddings"] is False  # a UI hides embedding features for it
    assert remote_flags["collections"] and remote_flags["metadata_filtering"]
    assert remote_flags["search"] and remote_flags["rerank"]
    assert set(providers["upstream_http"]["connections"]) == {
        "upstream_http",
        "self_http",
        "offline",
        "scripted",
        "slow",
    }
    secrets = {c["name"]: c["config"] for c in reply["connections"]}
    assert secrets["scripted"]["api_key"] == "***"


@pytest.mark.spec("PRV-01.3", "PRV-02.1")
def test_selection_loads_a_provider_with_a_validated_configuration(local, remote):
    described = local.get("/api/v1/providers/upstream_http").json()
    schema = UpstreamHttpRagProvider.get_connection_schema()
    assert described["config_schema"] == schema
    assert schema["required"] == ["base_url"]
    assert {"base_url", "api_key", "timeout_s", "retries", "tenant_id"} <= set(schema["properties"])

    selected = local.post(
        "/api/v1/providers/upstream_http/select",
        json={"config": {"base_url": remote, "api_key": "k", "timeout_s": 5}},
    )
    assert selected.status_code == 200, selected.text
    body = selected.json()
    assert body["provider"] == "upstream_http" and body["health"]["status"] == "healthy"
    assert body["config"]["api_key"] == "***" and body["config"]["timeout_s"] == 5
    assert set(body["capabilities"]) == CAPABILITIES

    invalid = local.post(
        "/api/v1/providers/upstream_http/select",
        json={"config": {"base_url": "not a url", "timeout_s": -1, "colour": "red"}},
    )
    assert invalid.status_code == 400
    problem = invalid.json()
    assert problem["error"] == "invalid_provider_config" and problem["hint"]
    for field in ("base_url", "timeout_s", "colour"):
        assert field in problem["message"]

    missing = local.post("/api/v1/providers/upstream_http/select", json={"config": {}})
    assert missing.status_code == 400 and "base_url: Field required" in missing.json()["message"]
    configured = local.post("/api/v1/providers/scripted/select", json={}).json()
    assert configured["config"]["tenant_id"] == "acme"  # no config: the configured connection
    unknown = local.post("/api/v1/providers/chroma/select", json={})
    assert unknown.status_code == 404
    assert "builtin" in unknown.json()["message"] and "upstream_http" in unknown.json()["message"]
    no_connection = local.get("/api/v1/providers/nowhere/health")
    assert no_connection.status_code == 404 and "self_http" in no_connection.json()["message"]


# -- health -------------------------------------------------------------------------------------
@pytest.mark.spec("PRV-02.3")
def test_health_is_standard_with_timestamp_error_and_service_details(local, remote):
    _create(str(local.base_url), "health-a", 2)
    _create(str(local.base_url), "health-b", 1)
    before = datetime.now(UTC)

    builtin = local.get("/api/v1/providers/builtin/health").json()
    assert set(builtin) == {"status", "timestamp", "error", "details"}
    assert builtin["status"] == "healthy" and builtin["error"] is None
    assert (datetime.fromisoformat(builtin["timestamp"]) - before).total_seconds() < 30
    assert builtin["details"]["collection_count"] >= 2
    assert builtin["details"]["document_count"] >= 3
    assert builtin["details"]["storage_size_bytes"] > 0

    over_http = local.get("/api/v1/providers/upstream_http/health").json()
    b_collections = httpx.get(f"{remote}/collections").json()["count"]
    assert over_http["status"] == "healthy"
    assert over_http["details"]["collection_count"] == b_collections
    assert over_http["details"]["storage_size_bytes"] > 0

    down = local.get("/api/v1/providers/offline/health").json()
    assert down["status"] == "unhealthy"
    assert "unreachable" in down["error"] and down["timestamp"]


@pytest.mark.spec("PRV-12.3")
def test_the_http_provider_sees_the_remote_cross_encoder_in_its_health(local, remote):
    remote_health = httpx.get(f"{remote}/health").json()
    with_model = local.get("/api/v1/providers/upstream_http/health").json()["details"]
    assert with_model["cross_encoder"] == remote_health["cross_encoder"]
    assert with_model["rerank_available"] is True
    reply = local.post(
        "/api/v1/providers/upstream_http/rerank", json={"query": QUERY, "documents": _documents()}
    ).json()
    assert reply["reranked"] is True  # it called /rerank, safely

    without = local.get("/api/v1/providers/self_http/health").json()["details"]
    assert without["cross_encoder"] is None and without["rerank_available"] is False


# -- emptying through a provider ----------------------------------------------------------------
@pytest.mark.spec("PRV-09.7")
def test_emptying_through_a_provider_reaches_the_service_and_returns_its_answer(local, remote):
    _create(remote, "handbook", 3, {"display_name": "Handbook"})
    _create(remote, "direct", 2)
    reply = local.delete("/api/v1/providers/upstream_http/collections/handbook/documents/all")
    assert reply.status_code == 200
    body = reply.json()
    assert body["status"] == "emptied" and body["collection"] == "handbook"
    assert body["count_deleted"] == 3 and body["waited"] is True
    direct = httpx.delete(f"{remote}/collections/direct/documents/all").json()
    assert set(body) == set(direct)  # the format of the service's own answer
    after = httpx.get(f"{remote}/collections/handbook").json()
    assert after["count"] == 0 and after["metadata"] == {"display_name": "Handbook"}

    missing = local.delete("/api/v1/providers/upstream_http/collections/nope/documents/all")
    straight = httpx.delete(f"{remote}/collections/nope/documents/all")
    assert missing.status_code == straight.status_code == 404
    assert missing.json() == straight.json()

    _create(str(local.base_url), "local-notes", 1)
    builtin = local.delete("/api/v1/providers/builtin/collections/local-notes/documents/all")
    assert builtin.json()["count_deleted"] == 1 and set(builtin.json()) == set(direct)


# -- rerank() ------------------------------------------------------------------------------------
@pytest.mark.spec("PRV-14.1", "PRV-14.7")
def test_rerank_through_the_http_provider_uses_the_remote_cross_encoder(local, remote):
    documents = _documents()
    reply = local.post(
        "/api/v1/providers/upstream_http/rerank", json={"query": QUERY, "documents": documents}
    ).json()
    direct = httpx.post(
        f"{remote}/rerank",
        json={"query": QUERY, "documents": [{"id": d["id"], "text": d["text"]} for d in documents]},
    ).json()["reranked"]
    assert reply["reranked"] is True
    result = reply["documents"]
    assert [d["id"] for d in result] == [r["id"] for r in direct]
    by_id = {d["id"]: d for d in documents}
    for item, scored in zip(result, direct, strict=True):
        original = by_id[item["id"]]
        assert item["score"] == pytest.approx(scored["score"])  # updated scores
        assert item["original_score"] == original["score"]
        assert item["original_rank"] == scored["original_rank"]
        assert item["text"] == original["text"] and item["metadata"] == original["metadata"]
    in_process = httpx.post(
        f"{remote}/api/v1/providers/builtin/rerank", json={"query": QUERY, "documents": documents}
    ).json()
    assert [d["id"] for d in in_process["documents"]] == [d["id"] for d in result]


@pytest.mark.spec("PRV-14.1")
def test_rerank_sends_the_auth_and_tenant_headers_and_retries_a_transient_failure(local, scripted):
    reranked = [
        {"id": "b", "score": 0.9, "original_rank": 2},
        {"id": "a", "score": 0.1, "original_rank": 1},
    ]
    scripted.answer("/health", HEALTH_WITH_MODEL)
    scripted.answer(
        "/rerank", (502, {"message": "bad gateway"}, 0), (200, {"reranked": reranked}, 0)
    )
    documents = [{"id": "a", "text": "x", "extra": 1}, {"id": "b", "text": "y"}]
    reply = local.post(
        "/api/v1/providers/scripted/rerank", json={"query": QUERY, "documents": documents}
    ).json()
    assert reply["reranked"] is True
    assert [d["id"] for d in reply["documents"]] == ["b", "a"]
    assert reply["documents"][1]["extra"] == 1
    calls = scripted.seen("/rerank")
    assert len(calls) == 2  # the 502 was retried
    assert calls[-1]["body"]["documents"] == [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]
    assert calls[-1]["headers"]["Authorization"] == "Bearer s3cret"
    assert calls[-1]["headers"]["X-Tenant-Id"] == "acme"


@pytest.mark.spec("PRV-14.1")
def test_rerank_uses_the_configured_timeout(local, scripted, caplog):
    scripted.answer("/health", HEALTH_WITH_MODEL)
    scripted.answer("/rerank", (200, {"reranked": []}, 2.0))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        reply = local.post(
            "/api/v1/providers/slow/rerank", json={"query": QUERY, "documents": _documents()}
        ).json()
    assert time.monotonic() - started < 1.8  # 0.5 s timeout, no retry
    assert reply["reranked"] is False and reply["documents"] == _documents()
    assert "Timeout" in reply["reason"]


@pytest.mark.spec("PRV-14.2")
def test_documents_without_ids_get_fallback_ids_before_the_call(local, scripted):
    scripted.answer("/health", HEALTH_WITH_MODEL)
    reranked = [
        {"id": "doc-0", "score": 0.2, "original_rank": 1},
        {"id": "keep", "score": 0.9, "original_rank": 2},
    ]
    scripted.answer("/rerank", (200, {"reranked": sorted(reranked, key=lambda r: -r["score"])}, 0))
    documents = [{"text": "no id"}, {"id": "keep", "text": "has one"}, {"id": None, "text": "n"}]
    reply = local.post(
        "/api/v1/providers/scripted/rerank", json={"query": QUERY, "documents": documents}
    ).json()
    sent = scripted.seen("/rerank")[-1]["body"]["documents"]
    assert [d["id"] for d in sent] == ["doc-0", "keep", "doc-2"]
    assert all(d["id"] for d in reply["documents"])


@pytest.mark.spec("PRV-14.3")
def test_without_a_remote_cross_encoder_the_documents_come_back_unchanged(local, caplog):
    documents = _documents()
    with caplog.at_level(logging.WARNING):
        reply = local.post(
            "/api/v1/providers/self_http/rerank", json={"query": QUERY, "documents": documents}
        )
    assert reply.status_code == 200
    assert reply.json()["documents"] == documents and reply.json()["reranked"] is False
    assert "no cross-encoder" in reply.json()["reason"]
    assert any(
        r.levelno == logging.WARNING and "no cross-encoder" in r.getMessage()
        for r in caplog.records
    )


@pytest.mark.spec("PRV-14.4")
def test_an_unreachable_service_leaves_the_documents_unchanged(local, caplog):
    documents = _documents()
    with caplog.at_level(logging.WARNING):
        reply = local.post(
            "/api/v1/providers/offline/rerank", json={"query": QUERY, "documents": documents}
        )
    assert reply.status_code == 200
    assert reply.json()["documents"] == documents and reply.json()["reranked"] is False
    assert "unreachable" in reply.json()["reason"]
    assert any("unreachable" in r.getMessage() for r in caplog.records if r.levelno >= 30)


@pytest.mark.spec("PRV-14.5")
@pytest.mark.parametrize("status", [503, 500, 400])
def test_an_error_from_rerank_leaves_the_documents_unchanged(local, scripted, caplog, status):
    scripted.answer("/health", HEALTH_WITH_MODEL)
    scripted.answer("/rerank", (status, {"message": f"scripted failure {status}"}, 0))
    documents = _documents()
    with caplog.at_level(logging.ERROR):
        reply = local.post(
            "/api/v1/providers/scripted/rerank", json={"query": QUERY, "documents": documents}
        )
    assert reply.status_code == 200
    assert reply.json()["documents"] == documents and reply.json()["reranked"] is False
    assert any(
        r.levelno == logging.ERROR and f"scripted failure {status}" in r.getMessage()
        for r in caplog.records
    )


@pytest.mark.spec("PRV-14.6")
def test_top_k_is_passed_to_the_service(local, scripted):
    scripted.answer("/health", HEALTH_WITH_MODEL)
    scripted.answer("/rerank", (200, {"reranked": []}, 0))
    local.post(
        "/api/v1/providers/scripted/rerank",
        json={"query": QUERY, "documents": _documents(), "top_k": 2},
    )
    assert scripted.seen("/rerank")[-1]["body"]["top_k"] == 2
    reply = local.post(
        "/api/v1/providers/upstream_http/rerank",
        json={"query": QUERY, "documents": _documents(), "top_k": 2},
    ).json()
    assert reply["reranked"] is True and len(reply["documents"]) == 2
