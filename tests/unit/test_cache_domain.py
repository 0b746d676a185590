"""Caches in the domain: the invalidation ledger, the evidence an event touches, the key form."""

from __future__ import annotations

import json

import pytest

from bus.asyncapi import asyncapi_json, envelope_schema
from bus.cache_subjects import CACHE_EVENT_SCHEMAS, EVENT_CACHES_INVALIDATED
from commands.cache import InvalidateCache
from commands.models import IngestFile
from domain.cache import (
    CacheScope,
    InvalidCacheScope,
    evidence_keys,
    normalise_question,
    parse_scope,
    touched_evidence,
)

pytestmark = pytest.mark.unit

SQL = "insert into marts.summary select a from staging.orders join staging.customers using (id)"


@pytest.mark.spec("LLM-06.2")
def test_questions_are_normalised_for_the_exact_key():
    assert normalise_question("  What FEEDS\tcustomer_summary ?! ") == "what feeds customer_summary"
    assert normalise_question("Straße?") == normalise_question("STRASSE")
    assert normalise_question("a.b") == "a.b"  # a dot inside a name stays


def test_scopes_parse_and_a_wrong_one_is_a_clear_error():
    assert parse_scope(" ALL ") is CacheScope.ALL
    assert CacheScope.ALL.answers and CacheScope.ALL.embeddings
    assert CacheScope.ANSWERS.answers and not CacheScope.ANSWERS.embeddings
    with pytest.raises(InvalidCacheScope) as error:
        parse_scope("everything")
    assert "'answers'" in error.value.message and error.value.hint


@pytest.mark.spec("LLM-37.3")
def test_invalidate_cache_records_caches_invalidated_with_a_documented_schema(memory_app):
    first = memory_app.invalidate_cache(InvalidateCache(scope="all", reason="model changed"))
    second = memory_app.invalidate_cache(InvalidateCache(actor="ops"))
    assert first.changed and second.position > first.position
    envelopes = [e for e in memory_app.read(0, 100) if e.aggregate == "cache"]
    invalidations = [e for e in envelopes if e.event_type == "CachesInvalidated"]
    assert invalidations[0].subject == EVENT_CACHES_INVALIDATED
    assert [e.payload for e in invalidations] == [
        {"scope": "all", "reason": "model changed", "actor": "api", "sequence": 1},
        {"scope": "answers", "reason": "", "actor": "ops", "sequence": 2},
    ]
    for envelope in envelopes:  # every cache event validates against its documented schema
        payload_model, _ = CACHE_EVENT_SCHEMAS[envelope.subject]
        parsed = envelope_schema("E", payload_model).model_validate(json.loads(envelope.to_json()))
        assert parsed.model_dump()["payload"] == envelope.payload
    spec = json.loads(asyncapi_json())
    assert {"cmd.cache.invalidate", EVENT_CACHES_INVALIDATED} <= set(spec["channels"])
    assert "InvalidateCache" in spec["components"]["schemas"]


def test_a_wrong_scope_records_nothing(memory_app):
    with pytest.raises(InvalidCacheScope):
        memory_app.invalidate_cache(InvalidateCache(scope="nope"))
    assert memory_app.max_position() == 0


def _events(memory_app, path: str, content: str) -> list:
    before = memory_app.max_position()
    memory_app.ingest_file(IngestFile(project_id="shop", path=path, content=content))
    return memory_app.read(before, 100)


def test_an_ingested_file_touches_its_file_chunks_nodes_and_edges(memory_app):
    events = {e.event_type: e for e in _events(memory_app, "m.sql", SQL)}
    chunked = touched_evidence("FileChunked", events["FileChunked"].payload)
    assert chunked is not None and chunked.tenant_id == "default"
    assert chunked.urns == {"urn:li:file:shop:m.sql", "urn:li:chunk:shop:m.sql#0"}
    lineage = touched_evidence("LineageExtracted", events["LineageExtracted"].payload)
    assert lineage is not None
    assert {
        "urn:li:dataset:shop:marts.summary",
        "urn:li:dataset:shop:staging.orders",
        "urn:li:dataset:shop:staging.customers",
    } <= lineage.urns
    edges = events["LineageExtracted"].payload["edges"]
    assert set(lineage.remembered_edges) == {e["edge_id"] for e in edges}
    assert set(lineage.remembered_edges) <= lineage.urns
    assert touched_evidence("ModelConfigCreated", {}) is None


def test_retracted_edges_are_left_for_the_reader_to_resolve(memory_app):
    _events(memory_app, "m.sql", SQL)
    later = {e.event_type: e for e in _events(memory_app, "m.sql", "select 1 from staging.orders")}
    retracted = touched_evidence("LineageEdgesRetracted", later["LineageEdgesRetracted"].payload)
    assert retracted is not None and retracted.retracted_edges
    assert "urn:li:file:shop:m.sql" in retracted.urns


def test_a_chunk_is_indexed_under_its_file_too():
    assert evidence_keys("urn:li:chunk:shop:models/a.sql#3") == {
        "urn:li:chunk:shop:models/a.sql#3",
        "urn:li:file:shop:models/a.sql",
    }
    assert evidence_keys("urn:li:dataset:shop:x") == {"urn:li:dataset:shop:x"}
    assert evidence_keys("3f2a-edge-id") == {"3f2a-edge-id"}
