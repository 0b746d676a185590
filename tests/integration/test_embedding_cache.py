"""The embedding cache against the machine's real Redis (a key prefix per test), and its
in-process fallback."""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Iterator, Sequence

import pytest
import redis

from adapters.cache_store import MemoryStore, RedisStore
from adapters.embedding_cache import CachingEmbedder, embedding_key
from adapters.memory import HashingEmbedder
from adapters.settings import Settings
from domain.ports import Embedder
from tests.integration.redis_server import MACHINE_REDIS_URL, RedisServer

pytestmark = pytest.mark.integration


class RecordingEmbedder(HashingEmbedder):
    """Records every batch it is asked to embed."""

    def __init__(self, model_name: str = "hashing-test") -> None:
        super().__init__(model_name=model_name)
        self.batches: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return super().embed(texts)


@pytest.fixture
def redis_store() -> Iterator[RedisStore]:
    store = RedisStore(MACHINE_REDIS_URL, prefix=f"upstream-test-{uuid.uuid4().hex}:")
    yield store
    store.delete_matching("*")
    store.close()


@pytest.fixture
def raw_redis() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(MACHINE_REDIS_URL)
    yield client
    client.close()


def _cached(inner: Embedder, store, **kw) -> CachingEmbedder:
    return CachingEmbedder(inner, store, memo_size=0, **kw)


@pytest.mark.spec("LLM-30.2", "LLM-06.1", "LLM-02.3")
def test_a_new_text_is_embedded_and_stored_under_its_md5_for_24_hours(redis_store, raw_redis):
    inner = RecordingEmbedder()
    embedder = _cached(inner, redis_store)
    vector = embedder.embed(["what feeds customer_summary"])[0]

    assert inner.batches == [["what feeds customer_summary"]]  # a miss calls the model
    digest = hashlib.md5(b"hashing-test\x00what feeds customer_summary").hexdigest()
    key = f"{redis_store.prefix}embedding:{digest}"
    assert embedding_key("hashing-test", "what feeds customer_summary") == f"embedding:{digest}"
    assert raw_redis.exists(key)
    assert 24 * 3600 - 5 < raw_redis.ttl(key) <= 24 * 3600
    assert len(raw_redis.get(key)) == 4 * len(vector)  # float32
    assert embedder.stats()["misses"] == 1 and embedder.stats()["hits"] == 0


@pytest.mark.spec("LLM-30.1", "LLM-06.1", "LLM-02.3")
def test_a_repeated_text_comes_from_redis_and_the_model_is_not_called(redis_store):
    inner = RecordingEmbedder()
    first = _cached(inner, redis_store).embed(["which models read stg_orders"])
    again_process = _cached(inner, redis_store)  # another process: same Redis, empty memo
    assert again_process.embed(["which models read stg_orders"]) == first
    assert len(inner.batches) == 1
    stats = again_process.stats()
    assert stats["hits"] == 1 and stats["hit_rate"] == 1.0 and stats["embedder_calls_saved"] == 1


@pytest.mark.spec("LLM-38.1", "LLM-02.3")
def test_a_batch_checks_every_text_in_one_round_trip_and_embeds_only_the_misses(redis_store):
    inner = RecordingEmbedder()
    embedder = _cached(inner, redis_store)
    embedder.embed(["b", "d"])
    inner.batches.clear()
    calls: list[int] = []
    real_mget = redis_store.client.mget
    redis_store.client.mget = lambda keys: calls.append(len(keys)) or real_mget(keys)

    texts = ["a", "b", "c", "d", "a"]
    vectors = embedder.embed(texts)

    assert calls == [4]  # one MGET for the four distinct texts
    assert inner.batches == [["a", "c"]]  # only the misses, each once
    assert vectors == [hashing_vector(t) for t in texts]  # in input order


def hashing_vector(text: str) -> list[float]:
    from adapters.embedding_cache import pack, unpack

    return unpack(pack(HashingEmbedder().embed([text])[0]))


@pytest.mark.spec("LLM-38.2")
def test_more_than_fifty_misses_go_to_the_model_in_sequential_sub_batches_of_fifty(redis_store):
    inner = RecordingEmbedder()
    embedder = _cached(inner, redis_store)
    texts = [f"text {i}" for i in range(120)]
    vectors = embedder.embed(texts)
    assert [len(b) for b in inner.batches] == [50, 50, 20]
    assert [t for b in inner.batches for t in b] == texts  # in order, nothing twice
    assert len(vectors) == 120 and embedder.stats()["embedder_calls"] == 3
    assert _cached(inner, redis_store).embed(texts) == vectors  # all cached now
    assert len(inner.batches) == 3


def test_two_models_never_share_an_entry(redis_store):
    small, large = RecordingEmbedder("model-a"), RecordingEmbedder("model-b")
    _cached(small, redis_store).embed(["same text"])
    _cached(large, redis_store).embed(["same text"])
    assert small.batches == large.batches == [["same text"]]
    assert redis_store.count_matching("embedding:*") == 2


@pytest.mark.spec("PRV-03.5")
def test_within_a_request_the_same_text_is_embedded_once_for_several_collections(caplog):
    inner = RecordingEmbedder()
    embedder = CachingEmbedder(inner, MemoryStore(), memo_size=64)
    caplog.set_level(logging.DEBUG, logger="adapters.embedding_cache")
    query = "revenue definitions"
    per_collection = [embedder.embed([query])[0] for _ in ("docs", "models", "tickets")]
    assert inner.batches == [[query]]
    assert per_collection[0] == per_collection[1] == per_collection[2]
    assert embedder.stats()["memo_hits"] == 2
    assert any("1 of 1 texts cached" in r.getMessage() for r in caplog.records)


@pytest.mark.spec("PRV-03.5", "LLM-30.3")
def test_the_request_memo_holds_even_while_redis_is_down(tmp_path):
    server = RedisServer(tmp_path / "redis")
    server.start()
    inner = RecordingEmbedder()
    embedder = CachingEmbedder(inner, RedisStore(server.url, retry_interval_s=60), memo_size=64)
    server.stop()
    for _ in range(3):
        embedder.embed(["what breaks if stg_orders changes"])
    assert len(inner.batches) == 1


@pytest.mark.spec("LLM-30.3")
def test_with_redis_down_every_text_is_embedded_directly_and_nothing_fails(tmp_path):
    server = RedisServer(tmp_path / "redis")
    server.start()
    inner = RecordingEmbedder()
    store = RedisStore(server.url, retry_interval_s=0.1)
    embedder = _cached(inner, store)
    server.stop()
    started = time.perf_counter()
    assert embedder.embed(["x", "y"]) == [hashing_vector("x"), hashing_vector("y")]
    assert embedder.embed(["x"]) == [hashing_vector("x")]
    assert time.perf_counter() - started < 2
    assert inner.batches == [["x", "y"], ["x"]]  # direct calls, uncached
    server.start()
    time.sleep(0.15)
    embedder.embed(["x"])
    embedder.embed(["x"])
    assert inner.batches[-1] == ["x"] and len(inner.batches) == 3  # cached again
    server.stop()


@pytest.mark.unit
@pytest.mark.spec("LLM-30.3")
def test_without_redis_url_the_cache_is_in_process_with_a_warning(tmp_path, caplog):
    import asyncio

    from adapters.cache_wiring import build_caches
    from commands.application import UpstreamApplication

    settings = Settings(UPSTREAM_DATA_DIR=tmp_path)  # type: ignore[call-arg]
    app = UpstreamApplication(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
    caches = build_caches(settings, RecordingEmbedder(), None, app)
    caplog.set_level(logging.WARNING)
    asyncio.run(caches.start())
    assert caches.store.backend == "memory" and not caches.store.shared
    assert any("REDIS_URL is not set" in r.getMessage() for r in caplog.records)
    caches.embedder.embed(["a"])
    caches.embedder.embed(["a"])
    assert caches.embedder.inner.batches == [["a"]]
    asyncio.run(caches.stop())
    app.close()


@pytest.mark.unit
def test_the_wrapper_passes_the_tokenizer_and_model_through():
    inner = RecordingEmbedder()
    inner.count_tokens = lambda text: len(text.split())  # type: ignore[attr-defined]
    embedder = CachingEmbedder(inner, MemoryStore())
    assert embedder.model_name == "hashing-test" and embedder.dimension == 64
    assert embedder.count_tokens("a b c") == 3
    assert embedder.embed([]) == []
