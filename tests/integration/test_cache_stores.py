"""One contract for the caches' key-value store, run against the in-process store and the
machine's real Redis (each test under a prefix of its own), plus the Redis outage path against
a redis-server the test stops and starts again."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import pytest

from adapters.cache_store import MemoryStore, RedisStore, redact_url
from domain.cache_ports import KeyValueStore
from tests.integration.redis_server import MACHINE_REDIS_URL, RedisServer


def _memory() -> KeyValueStore:
    return MemoryStore(prefix=f"t{uuid.uuid4().hex[:8]}:")


def _redis() -> KeyValueStore:
    return RedisStore(MACHINE_REDIS_URL, prefix=f"upstream-test-{uuid.uuid4().hex}:")


@pytest.fixture(
    params=[
        pytest.param(_memory, id="memory", marks=pytest.mark.unit),
        pytest.param(_redis, id="redis", marks=pytest.mark.integration),
    ]
)
def store(request) -> Iterator[KeyValueStore]:
    kv = request.param()
    assert isinstance(kv, KeyValueStore)
    yield kv
    kv.delete_matching("*")
    kv.close()


def test_values_round_trip_in_order_with_misses(store):
    store.set_many({"a": b"1", "b": b"\x00\xff"}, 60)
    assert store.get_many(["b", "x", "a"]) == [b"\x00\xff", None, b"1"]
    assert store.get_many([]) == []
    assert store.delete(["a", "x"]) == 1
    assert store.get_many(["a"]) == [None]


def test_entries_expire_after_their_ttl(store):
    store.set_many({"short": b"1"}, 0.05)
    store.set_many({"long": b"2"}, 60)
    store.set_many({"forever": b"3"}, None)
    time.sleep(0.12)
    assert store.get_many(["short", "long", "forever"]) == [None, b"2", b"3"]


def test_matching_keys_are_counted_and_deleted_by_scanning(store):
    store.set_many({f"query:{i}": b"x" for i in range(25)}, 60)
    store.set_many({"embedding:1": b"y", "queryless": b"z"}, 60)
    assert store.count_matching("query:*") == 25
    assert store.delete_matching("query:*") == 25
    assert store.count_matching("query:*") == 0
    assert store.get_many(["embedding:1", "queryless"]) == [b"y", b"z"]


def test_sets_gather_members_and_are_taken_once(store):
    store.add_to_sets(["urn:a", "urn:b"], "query:1", 60)
    store.add_to_sets(["urn:b"], "query:2", 60)
    assert store.take_members(["urn:b", "urn:missing"]) == ["query:1", "query:2"]
    assert store.take_members(["urn:b"]) == []
    assert store.take_members(["urn:a"]) == ["query:1"]


def test_hashes_keep_fields(store):
    store.hash_set("edges", {"e1": "a\tb", "e2": "c\td"})
    store.hash_set("edges", {"e3": "e\tf"})
    assert store.hash_get("edges", ["e3", "nope", "e1"]) == ["e\tf", None, "a\tb"]


def test_prefixes_keep_stores_apart(store):
    other = type(store)(**_same_server(store), prefix=f"other-{uuid.uuid4().hex}:")
    store.set_many({"query:1": b"mine"}, 60)
    other.set_many({"query:1": b"theirs"}, 60)
    assert store.delete_matching("query:*") == 1
    assert other.get_many(["query:1"]) == [b"theirs"]
    other.delete_matching("*")


def test_status_reports_backend_availability_and_memory(store):
    store.set_many({"k": b"12345"}, 60)
    status = store.status()
    assert status["backend"] == store.backend and status["available"] is True
    assert status["memory_bytes"] > 0
    assert store.available() and store.probe()


def _same_server(store: KeyValueStore) -> dict:
    return {"url": store.url} if isinstance(store, RedisStore) else {}


@pytest.mark.unit
def test_the_memory_store_evicts_the_least_recently_used_but_never_pinned_entries():
    store = MemoryStore(max_entries=3)
    store.set_many({"pinned": b"p"}, None)
    store.set_many({"a": b"1", "b": b"2", "c": b"3"}, 60)
    store.get_many(["a"])  # a is used again: b is now the oldest
    store.set_many({"d": b"4"}, 60)
    assert store.get_many(["a", "b", "c", "d", "pinned"]) == [b"1", None, b"3", b"4", b"p"]
    assert store.evictions == 1


@pytest.mark.unit
def test_a_redis_url_is_shown_without_its_password():
    assert redact_url("redis://user:s3cret@host:6379/0") == "redis://user:***@host:6379/0"
    assert redact_url("redis://:s3cret@host:6379") == "redis://:***@host:6379"
    assert redact_url("redis://host:6379") == "redis://host:6379"


# -- the outage path, against a redis-server of the test's own ----------------------------------


@pytest.fixture
def own_redis(tmp_path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


@pytest.mark.integration
@pytest.mark.spec("LLM-30.3")
def test_an_unreachable_redis_misses_warns_once_and_recovers_by_itself(own_redis, caplog):
    store = RedisStore(own_redis.url, retry_interval_s=0.2)
    recovered: list[str] = []
    store.on_recovery(lambda: recovered.append("flush"))
    store.set_many({"k": b"v"}, 60)
    own_redis.stop()
    caplog.set_level(logging.WARNING, logger="adapters.cache_store")

    started = time.perf_counter()
    for _ in range(50):  # every call still answers, as an empty cache does
        assert store.get_many(["k"]) == [None]
        store.set_many({"k2": b"v"}, 60)
        assert store.delete_matching("query:*") == 0
    assert time.perf_counter() - started < 2.0  # calls skip the network between retries
    assert not store.available() and store.status()["available"] is False
    warnings = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(warnings) == 1  # once per outage
    assert "caches are off" in warnings[0].getMessage()

    own_redis.start()  # back, empty
    time.sleep(0.25)
    assert store.probe() and store.available()
    assert recovered == ["flush"]
    store.set_many({"k": b"again"}, 60)
    assert store.get_many(["k"]) == [b"again"]
    assert any("is back" in r.getMessage() for r in caplog.records)

    own_redis.stop()  # a second outage warns again
    assert store.get_many(["k"]) == [None]
    assert len([r for r in caplog.records if "unreachable" in r.getMessage()]) == 2
    store.close()
