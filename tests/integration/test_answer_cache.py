"""The answer caches against the machine's real Redis (a key prefix per test) and a Qdrant
`query_cache` collection (in memory), with invalidation driven by real recorded events."""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from adapters.cache_store import MemoryStore, RedisStore
from adapters.embedding_cache import CachingEmbedder
from adapters.memory import HashingEmbedder
from adapters.qdrant_query_cache import QdrantQueryCache
from commands.cache import InvalidateCache
from commands.models import DeleteFile, IngestFile
from projections.cache import CacheProjection, CacheReadModel
from queries.answer_cache import AnswerCache, AnswerKey, point_id
from tests.integration.redis_server import MACHINE_REDIS_URL, RedisServer

pytestmark = pytest.mark.integration

DIM = 8


def vec(cosine: float) -> list[float]:
    """A unit vector whose cosine with `vec(1.0)` is `cosine`."""
    return [cosine, math.sqrt(max(0.0, 1 - cosine * cosine))] + [0.0] * (DIM - 2)


def key(question: str = "Which models read stg_orders?", **fields) -> AnswerKey:
    base = {
        "intent": "semantic",
        "question": question,
        "project_id": "shop",
        "tenant_id": "acme",
        "user_tags": ("finance",),
        "pipeline": "hybrid",
        "chain_version": "7|",
    }
    return AnswerKey(**{**base, **fields})


def response(answer: str) -> dict:
    return {"answer": answer, "evidence": [], "metadata": {"action": "CITE", "cache": None}}


@pytest.fixture
def redis_store() -> Iterator[RedisStore]:
    store = RedisStore(MACHINE_REDIS_URL, prefix=f"upstream-test-{uuid.uuid4().hex}:")
    yield store
    store.delete_matching("*")
    store.close()


@pytest.fixture
def answers(redis_store) -> Iterator[AnswerCache]:
    cache = AnswerCache(redis_store, QdrantQueryCache(location=":memory:"))
    yield cache
    cache.close()


def lookup(cache: AnswerCache, k: AnswerKey, vector=None):
    return asyncio.run(cache.lookup(k, vector))


def store(cache: AnswerCache, k: AnswerKey, vector, body, urns=()) -> None:
    """Store an answer computed now (after every event so far was applied)."""
    asyncio.run(cache.store(k, vector, body, list(urns), computed_at=time.time()))


# -- exact ------------------------------------------------------------------------------------


@pytest.mark.spec("LLM-06.2")
def test_an_identical_request_is_answered_from_the_exact_cache_for_an_hour(answers, redis_store):
    store(answers, key(), vec(1.0), response("stg_orders is read by fct_orders"))
    hit = lookup(answers, key("  which MODELS read stg_orders "))  # normalised: the same key
    assert hit is not None and hit.kind == "exact" and hit.score == 1.0
    assert hit.response == response("stg_orders is read by fct_orders")
    raw = redis.Redis.from_url(MACHINE_REDIS_URL)
    full_key = redis_store.prefix + key().exact_key()
    assert key().exact_key().startswith("query:") and len(key().exact_key()) == 6 + 64
    assert 3600 - 5 < raw.ttl(full_key) <= 3600
    raw.close()
    for other in (
        key(tenant_id="globex"),
        key(project_id="other"),
        key(intent="deep"),
        key(user_tags=()),
        key(pipeline="vector"),
        key(chain_version="8|"),
    ):
        assert lookup(answers, other) is None  # every field the answer depends on is keyed
    assert answers.status()["exact"]["hits"] == 1 and answers.status()["exact"]["misses"] == 6


def test_tags_are_keyed_as_a_set():
    assert key(user_tags=("b", "a", "a")).exact_key() == key(user_tags=("a", "b")).exact_key()


# -- semantic ---------------------------------------------------------------------------------


@pytest.mark.spec("LLM-37.2")
def test_a_stored_answer_puts_its_question_in_query_cache_with_its_redis_key(answers):
    before = time.time()
    urns = ["urn:li:dataset:shop:stg_orders", "urn:li:chunk:shop:models/fct_orders.sql#0"]
    store(answers, key(), vec(1.0), response("x"), urns)
    [point] = answers.semantic.search(vec(1.0), key().partition(), 0.95, 5)
    assert point.point_id == point_id(key().exact_key())
    assert point.payload["redis_key"] == key().exact_key()
    assert before <= point.payload["timestamp"] <= time.time()
    assert (point.payload["tenant_id"], point.payload["project_id"]) == ("acme", "shop")
    assert point.payload["intent"] == "semantic"
    assert point.payload["evidence_urns"] == sorted(urns)
    assert answers.kv.get_many([key().exact_key()])[0] is not None


@pytest.mark.spec("LLM-37.1")
def test_a_paraphrase_scoring_095_or_more_is_answered_from_the_semantic_cache(answers, caplog):
    store(answers, key(), vec(1.0), response("fct_orders reads stg_orders"))
    caplog.set_level(logging.INFO, logger="queries.answer_cache")

    hit = lookup(answers, key("Which dbt models read from stg_orders?"), vec(0.97))

    assert hit is not None and hit.kind == "semantic"
    assert hit.score == pytest.approx(0.97, abs=1e-4)
    assert hit.response == response("fct_orders reads stg_orders")
    logged = [r.getMessage() for r in caplog.records if "semantic cache hit" in r.getMessage()]
    assert logged and "score 0.97" in logged[0]
    assert lookup(answers, key("Which dbt models read from stg_orders?"), vec(0.94)) is None
    status = answers.status()["semantic"]
    assert (status["hits"], status["misses"], status["entries"]) == (1, 1, 1)


@pytest.mark.spec("LLM-37.1")
def test_a_negated_or_other_entity_question_is_never_a_semantic_hit(answers, caplog):
    store(answers, key(), vec(1.0), response("fct_orders reads stg_orders"))
    caplog.set_level(logging.INFO, logger="queries.answer_cache")
    assert lookup(answers, key("Which models do not read stg_orders?"), vec(0.99)) is None
    assert lookup(answers, key("Which models read stg_payments?"), vec(0.99)) is None
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 2 and "0.99" in refusals[0] and "negation differs" in refusals[0]
    assert answers.status()["semantic"]["refused_by_guard"] == 2


def test_the_semantic_cache_stays_inside_tenant_project_intent_and_tags(answers):
    store(answers, key(), vec(1.0), response("x"))
    paraphrase = "Which dbt models read from stg_orders?"
    for other in (
        key(paraphrase, tenant_id="globex"),
        key(paraphrase, project_id="other"),
        key(paraphrase, intent="deep"),
        key(paraphrase, user_tags=()),
    ):
        assert lookup(answers, other, vec(1.0)) is None


def test_a_semantic_point_whose_answer_expired_is_a_miss_and_is_removed(redis_store):
    cache = AnswerCache(redis_store, QdrantQueryCache(location=":memory:"), ttl_s=0.2)
    store(cache, key(), vec(1.0), response("x"))
    time.sleep(0.3)
    assert lookup(cache, key("Which dbt models read from stg_orders?"), vec(0.99)) is None
    assert cache.semantic.count() == 0
    cache.close()


def test_entity_words_that_differ_are_checked_against_the_graph(redis_store):
    looked_up: list[tuple] = []

    def entities(tenant, project, words):
        looked_up.append((tenant, project, words))
        return [w for w in words if w in {"orders", "customers"}]

    cache = AnswerCache(redis_store, QdrantQueryCache(location=":memory:"), entity_lookup=entities)
    store(cache, key("what feeds orders"), vec(1.0), response("x"))
    assert lookup(cache, key("what feeds customers"), vec(0.99)) is None
    assert looked_up == [("acme", "shop", ["customers", "orders"])]
    cache.close()


# -- invalidation -----------------------------------------------------------------------------


def _projection(cache: AnswerCache, embedder=None) -> CacheProjection:
    return CacheProjection(CacheReadModel(cache, embedder))


def _apply_new(projection: CacheProjection, app) -> None:
    projection.process(app.read(projection.position(), 1000))


@pytest.mark.spec("LLM-37.3")
def test_caches_invalidated_deletes_query_keys_and_truncates_query_cache(
    answers, memory_app, caplog
):
    embedder = CachingEmbedder(HashingEmbedder(), answers.kv, memo_size=0)
    embedder.embed(["kept across an answers invalidation"])
    for i in range(30):
        store(answers, key(f"question {i} about x_{i}"), vec(1.0), response(str(i)))
    projection = _projection(answers, embedder)
    caplog.set_level(logging.INFO)

    memory_app.invalidate_cache(InvalidateCache(reason="new dbt version", actor="ops"))
    _apply_new(projection, memory_app)

    assert answers.kv.count_matching("query:*") == 0
    assert answers.semantic.count() == 0
    assert answers.kv.count_matching("embedding:*") == 1  # scope answers keeps embeddings
    last = answers.last_invalidation()
    assert last["scope"] == "answers" and last["answers_deleted"] == 30
    assert last["reason"] == "new dbt version" and last["actor"] == "ops"
    assert last["position"] == memory_app.max_position()
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "caches invalidated at position" in messages and "30 answers" in messages
    assert "query_cache truncated" in messages

    memory_app.invalidate_cache(InvalidateCache(scope="embeddings"))
    _apply_new(projection, memory_app)
    assert answers.kv.count_matching("embedding:*") == 0
    assert projection.position() == memory_app.max_position()


def test_scan_deletion_never_uses_keys(answers, monkeypatch):
    store(answers, key(), vec(1.0), response("x"))
    monkeypatch.setattr(answers.kv.client, "keys", lambda *a, **k: pytest.fail("KEYS used"))
    assert answers.flush("test") == 1


DIM_SQL = "create view marts.{0} as select id, amount from staging.{1}"


def _ingest(app, path: str, content: str) -> None:
    app.ingest_file(IngestFile(project_id="shop", tenant_id="acme", path=path, content=content))


@pytest.mark.spec("LLM-06.2")
def test_ingesting_a_file_that_touches_x_drops_the_answers_citing_x_and_keeps_the_others(
    answers, memory_app
):
    _ingest(memory_app, "models/a.sql", DIM_SQL.format("a_summary", "orders"))
    _ingest(memory_app, "models/b.sql", DIM_SQL.format("b_summary", "payments"))
    projection = _projection(answers)
    _apply_new(projection, memory_app)
    orders = "urn:li:dataset:shop:staging.orders"
    about_orders = key("What reads staging.orders?")
    about_payments = key("What reads staging.payments?")
    about_doc = key("Where is revenue defined?")
    store(answers, about_orders, vec(1.0), response("a_summary"), [orders])
    store(
        answers,
        about_payments,
        vec(0.5),
        response("b_summary"),
        ["urn:li:dataset:shop:staging.payments", "urn:li:chunk:shop:models/b.sql#0"],
    )
    store(answers, about_doc, None, response("docs"), ["urn:li:chunk:shop:docs/rev.md#0"])

    _ingest(memory_app, "models/c.sql", DIM_SQL.format("c_summary", "orders"))  # touches X
    _apply_new(projection, memory_app)

    assert lookup(answers, about_orders) is None  # cited staging.orders: dropped
    assert answers.semantic.count() == 1  # and its question left query_cache
    assert lookup(answers, about_payments).response == response("b_summary")  # kept
    assert lookup(answers, about_doc).response == response("docs")  # kept
    assert answers.status()["invalidated_answers"] == 1

    _ingest(memory_app, "models/b.sql", DIM_SQL.format("b_summary", "payments") + " -- edit")
    _apply_new(projection, memory_app)
    assert lookup(answers, about_payments) is None  # its chunk's file changed
    assert lookup(answers, about_doc) is not None


def test_a_retracted_edge_drops_the_answers_citing_its_nodes(answers, memory_app):
    _ingest(memory_app, "models/a.sql", DIM_SQL.format("a_summary", "orders"))
    projection = _projection(answers)
    _apply_new(projection, memory_app)
    store(answers, key(), None, response("x"), ["urn:li:dataset:shop:staging.orders"])
    _ingest(memory_app, "models/a.sql", "create view marts.a_summary as select 1 as id")
    _apply_new(projection, memory_app)
    assert lookup(answers, key()) is None


def test_a_deleted_file_drops_the_answers_citing_its_chunks(answers, memory_app):
    _ingest(memory_app, "docs/rev.md", "# Revenue\nnet revenue is payments minus refunds\n")
    projection = _projection(answers)
    _apply_new(projection, memory_app)
    store(answers, key(), None, response("x"), ["urn:li:chunk:shop:docs/rev.md#0"])
    memory_app.delete_file(DeleteFile(project_id="shop", tenant_id="acme", path="docs/rev.md"))
    _apply_new(projection, memory_app)
    assert lookup(answers, key()) is None


def test_other_tenants_answers_are_not_touched(answers, memory_app):
    projection = _projection(answers)
    store(
        answers,
        key(tenant_id="globex"),
        None,
        response("x"),
        ["urn:li:dataset:shop:staging.orders"],
    )
    _ingest(memory_app, "models/a.sql", DIM_SQL.format("a_summary", "orders"))  # acme
    _apply_new(projection, memory_app)
    assert lookup(answers, key(tenant_id="globex")) is not None


def test_an_answer_whose_evidence_changed_while_it_was_computed_is_not_stored(answers, memory_app):
    projection = _projection(answers)
    started = time.time()
    _ingest(memory_app, "models/a.sql", DIM_SQL.format("a_summary", "orders"))
    _apply_new(projection, memory_app)  # applied while the answer was being computed
    stale = ["urn:li:dataset:shop:staging.orders"]
    asyncio.run(answers.store(key(), vec(1.0), response("old"), stale, computed_at=started))
    assert lookup(answers, key()) is None
    assert answers.status()["stores_skipped_stale"] == 1
    asyncio.run(answers.store(key(), vec(1.0), response("new"), stale, computed_at=time.time()))
    assert lookup(answers, key()).response == response("new")


def test_without_computed_at_the_missed_lookup_marks_when_answering_began(answers, memory_app):
    projection = _projection(answers)
    urns = ["urn:li:dataset:shop:staging.orders"]
    _ingest(memory_app, "models/a.sql", DIM_SQL.format("a_summary", "orders"))
    _apply_new(projection, memory_app)  # the evidence changed a moment ago
    asyncio.run(answers.store(key(), None, response("never looked up"), urns))
    assert lookup(answers, key()) is None  # no lookup, no computed_at: the quiet window counts

    asyncio.run(answers.store(key(), None, response("asked after the change"), urns))
    assert lookup(answers, key()).response == response("asked after the change")

    other = key("What else reads staging.orders?")
    assert lookup(answers, other) is None  # answering begins
    _ingest(memory_app, "models/c.sql", DIM_SQL.format("c_summary", "orders"))
    _apply_new(projection, memory_app)  # the evidence changes while it is computed
    asyncio.run(answers.store(other, None, response("stale"), urns))
    assert lookup(answers, other) is None


def test_a_rebuild_of_the_cache_read_model_flushes_answers_and_keeps_embeddings(
    answers, memory_app
):
    from projections.rebuild import rebuild

    embedder = CachingEmbedder(HashingEmbedder(), answers.kv, memo_size=0)
    embedder.embed(["a chunk"])
    _ingest(memory_app, "models/a.sql", DIM_SQL.format("a_summary", "orders"))
    projection = _projection(answers, embedder)
    store(answers, key(), vec(1.0), response("x"))
    assert rebuild(projection, memory_app) == memory_app.max_position()
    assert answers.kv.count_matching("query:*") == 0
    assert answers.kv.count_matching("embedding:*") == 1
    assert projection.model.checkpoint("cache") == memory_app.max_position()


def test_an_in_process_cache_starts_at_the_stores_head(memory_app):
    _ingest(memory_app, "models/a.sql", DIM_SQL.format("a_summary", "orders"))
    cache = AnswerCache(MemoryStore())
    projection = CacheProjection(CacheReadModel(cache), head=memory_app.max_position)
    projection.start()
    assert projection.position() == memory_app.max_position()
    store(cache, key(), None, response("x"), ["urn:li:dataset:shop:staging.orders"])
    _ingest(memory_app, "models/a.sql", "create view marts.a_summary as select 1 as id")
    _apply_new(projection, memory_app)  # an edge it never saw is retracted: flush all
    assert lookup(cache, key()) is None
    cache.close()


# -- degradation ------------------------------------------------------------------------------


@pytest.mark.spec("LLM-30.3")
def test_with_redis_down_the_answer_cache_misses_and_flushes_when_it_is_back(tmp_path):
    server = RedisServer(tmp_path / "redis")
    server.start()
    cache = AnswerCache(
        RedisStore(server.url, retry_interval_s=0.1), QdrantQueryCache(location=":memory:")
    )
    store(cache, key(), vec(1.0), response("before"))
    server.stop()
    assert lookup(cache, key(), vec(1.0)) is None
    store(cache, key("another question about x_y"), vec(0.2), response("during"))  # dropped
    assert cache.semantic.count() == 1  # no point for an answer that was not stored
    assert cache.status()["exact"]["entries"] == 0
    server.start()
    time.sleep(0.15)
    assert lookup(cache, key(), vec(1.0)) is None  # recovered: flushed (and empty anyway)
    assert cache.semantic.count() == 0
    store(cache, key(), vec(1.0), response("after"))
    assert lookup(cache, key()).response == response("after")
    cache.close()
    server.stop()
