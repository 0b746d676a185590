"""The caches in the running service (embedded NATS, SQLite events, the machine's Redis under a
key prefix per test): invalidation over HTTP and NATS, /api/v1/rag/status and /metrics,
dependency-aware invalidation from real ingests, replay without embedding, warming, health."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Sequence

import nats
import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import bootstrap
from adapters.memory import HashingEmbedder
from adapters.settings import Settings
from api.app import create_app
from queries.answer_cache import AnswerKey
from tests.integration.redis_server import MACHINE_REDIS_URL, RedisServer

pytestmark = pytest.mark.integration


class CountingEmbedder(HashingEmbedder):
    """The model behind the cache: counts the texts it really embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return super().embed(texts)


def _service(tmp_path, redis_url: str | None = MACHINE_REDIS_URL, prefix: str = "", **env):
    prefix = prefix or f"upstream-test-{uuid.uuid4().hex}:"
    settings = Settings(  # type: ignore[call-arg]
        UPSTREAM_DATA_DIR=tmp_path / "data",
        REDIS_URL=redis_url or "",
        CACHE_KEY_PREFIX=prefix,
        REDIS_RETRY_INTERVAL=0.1,
        **env,
    )
    model = CountingEmbedder()
    container = bootstrap(settings, "serve", embedder=model)
    return TestClient(create_app(container=container)), container, model


@pytest.fixture
def service(tmp_path):
    client, container, model = _service(tmp_path)
    with client:
        client.container = container  # type: ignore[attr-defined]
        client.model = model  # type: ignore[attr-defined]
        yield client
        container.caches.store.delete_matching("*")


def _ingest(client, files: dict[str, str], project: str = "shop") -> dict:
    body = {"project_id": project, "files": [{"path": p, "content": c} for p, c in files.items()]}
    reply = client.post("/api/v1/ingest?wait=true", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _key(question: str) -> AnswerKey:
    return AnswerKey("graph", question, "shop", "default", (), "hybrid", "1|")


def _store(container, question: str, urns: list[str]) -> None:
    container.answer_cache.store_sync(
        _key(question), None, {"answer": question}, urns, computed_at=time.time()
    )


def _cached(container, question: str) -> bool:
    return container.answer_cache.lookup_sync(_key(question), None) is not None


SQL = "create view marts.{0} as select id, amount from staging.{1}"


@pytest.mark.spec("LLM-37.3", "LLM-06.3")
def test_post_cache_invalidate_records_the_event_and_empties_the_answer_caches(service):
    container = service.container
    for i in range(3):
        _store(container, f"question {i} about t_{i}", [])
    reply = service.post(
        "/api/v1/cache/invalidate?wait=true", json={"scope": "answers", "reason": "test"}
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["status"] == "invalidated" and body["waited"] and body["scope"] == "answers"
    assert container.caches.store.count_matching("query:*") == 0
    [event] = [e for e in container.app.read(0, 1000) if e.event_type == "CachesInvalidated"]
    assert event.position == body["position"] and event.payload["reason"] == "test"

    status = service.get("/api/v1/rag/status").json()
    assert status["last_invalidation"]["position"] == body["position"]
    assert status["last_invalidation"]["answers_deleted"] == 3
    bad = service.post("/api/v1/cache/invalidate", json={"scope": "everything"})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_cache_scope"
    assert "answers" in bad.json()["message"] and bad.json()["hint"]


@pytest.mark.spec("LLM-37.3")
def test_another_process_can_invalidate_over_nats(service):
    container = service.container
    _store(container, "what feeds x_1", [])

    async def request() -> dict:
        nc = await nats.connect(container.nats_url)
        payload = json.dumps({"scope": "all", "reason": "from a script"}).encode()
        reply = await nc.request("cmd.cache.invalidate", payload, timeout=10)
        await nc.close()
        return json.loads(reply.data)

    result = asyncio.run(request())
    assert result["accepted"] and result["position"]
    asyncio.run(_wait(container, result["position"]))
    assert not _cached(container, "what feeds x_1")
    invalid = asyncio.run(_request_raw(container, {"scope": 3, "extra": True}))
    assert invalid["accepted"] is False and invalid["error"]["code"] == "invalid_command"


async def _wait(container, position: int) -> None:
    deadline = time.monotonic() + 20
    while container.read_model_position("cache") < position:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


async def _request_raw(container, body: dict) -> dict:
    nc = await nats.connect(container.nats_url)
    reply = await nc.request("cmd.cache.invalidate", json.dumps(body).encode(), timeout=10)
    await nc.close()
    return json.loads(reply.data)


@pytest.mark.spec("LLM-06.2")
def test_ingesting_a_file_touching_x_drops_only_the_answers_citing_x(service):
    container = service.container
    _ingest(service, {"models/a.sql": SQL.format("a", "orders"), "docs/r.md": "# Revenue\n"})
    _store(container, "what reads staging.orders", ["urn:li:dataset:shop:staging.orders"])
    _store(container, "where is revenue defined", ["urn:li:chunk:shop:docs/r.md#0"])
    _ingest(service, {"models/c.sql": SQL.format("c", "orders")})  # touches staging.orders
    assert not _cached(container, "what reads staging.orders")
    assert _cached(container, "where is revenue defined")


@pytest.mark.spec("LLM-06.3", "LLM-30.1")
def test_status_and_metrics_show_hit_rates_savings_entries_and_memory(service):
    _ingest(service, {"models/a.sql": SQL.format("a", "orders")})
    for _ in range(3):
        service.post("/api/v1/search", json={"query": "which views read orders"})
    status = service.get("/api/v1/rag/status").json()
    embedding = status["embedding"]
    assert embedding["enabled"] and embedding["hits"] >= 2 and embedding["misses"] >= 2
    assert 0 < embedding["hit_rate"] < 1 and embedding["embedder_calls_saved"] >= 2
    assert embedding["entries"] >= 2
    assert service.model.texts.count("which views read orders") == 1  # the model saw it once
    assert status["backend"]["backend"] == "redis" and status["backend"]["available"]
    assert status["backend"]["memory_bytes"] > 0
    assert {"hits", "misses", "hit_rate", "entries"} <= set(status["exact"])
    assert {"hits", "misses", "hit_rate", "entries", "threshold"} <= set(status["semantic"])
    metrics = service.get("/metrics").text
    lines = dict(line.rsplit(" ", 1) for line in metrics.splitlines() if line[:1] != "#")
    assert float(lines['upstream_cache_hits_total{cache="embedding"}']) == embedding["hits"]
    assert float(lines['upstream_cache_misses_total{cache="embedding"}']) == embedding["misses"]
    assert float(lines["upstream_embedder_calls_saved_total"]) == embedding["embedder_calls_saved"]
    for name in (
        'upstream_cache_hit_rate{cache="exact"}',
        'upstream_cache_entries{cache="embedding"}',
        "upstream_embedder_calls_saved_total",
        "upstream_cache_memory_bytes",
        "upstream_cache_available 1.0",
    ):
        assert name in metrics


@pytest.mark.spec("LLM-37.3", "LLM-02.3")
def test_replaying_the_vectors_embeds_nothing_and_flushes_the_answers(service):
    container = service.container
    _ingest(service, {f"models/m{i}.sql": SQL.format(f"m{i}", f"t{i}") for i in range(8)})
    embedded = len(service.model.texts)
    _store(container, "what reads staging.t1", [])
    live = container.index.dump()

    reply = service.post("/api/v1/replay", json={"projection": "vectors"})

    assert reply.status_code == 200
    assert len(service.model.texts) == embedded  # every chunk came from the embedding cache
    assert container.index.dump() == live
    assert not _cached(container, "what reads staging.t1")  # a reindex flushes all answers


@pytest.mark.spec("LLM-38.3")
def test_cache_warming_embeds_the_most_connected_entities_at_start(tmp_path):
    first, container, _ = _service(tmp_path)
    prefix = container.settings.cache_key_prefix
    with first:
        _ingest(first, {f"models/m{i}.sql": SQL.format(f"m{i}", "orders") for i in range(4)})
        top = container.graph.most_connected_names(3)
    assert top[0] == "staging.orders"  # read by every model
    again, container, model = _service(
        tmp_path, prefix=prefix, USE_CACHE_WARMING=True, CACHE_WARMING_ENTITIES=3
    )
    with again:
        asyncio.run(_wait_warmed(container))
        warming = again.get("/api/v1/rag/status").json()["warming"]
        assert warming["state"] == "done" and warming["entities"] == 3
        assert warming["embedded"] == 3 and model.texts == top
        hits = container.embedder.stats()["hits"]
        container.embedder.embed(["staging.orders"])  # a later query finds it warm
        assert container.embedder.stats()["hits"] == hits + 1 and model.texts == top
        container.caches.store.delete_matching("*")


async def _wait_warmed(container) -> None:
    deadline = time.monotonic() + 20
    while container.caches.warming.get("state") == "running":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


@pytest.mark.spec("LLM-30.3")
def test_health_shows_the_cache_degraded_while_redis_is_down_and_recovers(tmp_path):
    server = RedisServer(tmp_path / "redis")
    server.start()
    client, _, _ = _service(tmp_path, redis_url=server.url)
    with client:
        assert client.get("/health").json()["components"]["cache"]["status"] == "ok"
        server.stop()
        hits = client.post("/api/v1/search", json={"query": "anything at all"})
        assert hits.status_code == 200  # works uncached
        health = client.get("/health").json()
        assert health["components"]["cache"]["status"] == "degraded"
        assert health["status"] == "degraded"
        assert client.get("/api/v1/rag/status").json()["backend"]["available"] is False
        server.start()
        time.sleep(0.15)
        assert client.get("/health").json()["components"]["cache"]["status"] == "ok"
    server.stop()
