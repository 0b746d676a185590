"""The five chat endpoints over an ingested 57-model dbt project, answered by the offline
`extractive` provider (the `local` seed profile's last link): no model, deterministic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.corpus_service import ingested_service

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "dbt_shop"
CONTRACT_KEYS = {"answer", "evidence", "next_actions", "warnings", "model", "metadata"}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    data = tmp_path_factory.mktemp("chat")
    with ingested_service(data, CORPUS, "shop", UPSTREAM_SEED_PROFILE="local") as client:
        yield client


def _ask(service, intent: str, query: str, **extra) -> dict:
    reply = service.post(f"/api/chat/{intent}", json={"query": query, **extra})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert set(body) == CONTRACT_KEYS
    return body


def _upstream_urns(service, name: str, hops: int) -> set[str]:
    reply = service.get(
        f"/api/v1/lineage/{name}/upstream", params={"hops": hops, "project_id": "shop"}
    )
    assert reply.status_code == 200, reply.text
    return {n["urn"] for n in reply.json()["nodes"]}


@pytest.mark.spec("LLM-18.2", "LLM-24.4", "LLM-25.1")
def test_graph_intent_cites_exactly_the_parsers_upstream_set(service):
    body = _ask(service, "graph", "What are the upstream sources of fct_payments?")

    expected = _upstream_urns(service, "fct_payments", 3)
    assert expected, "the parser found upstream lineage"
    assert {e["id"] for e in body["evidence"]} == expected
    assert all(e["type"] == "graph" for e in body["evidence"])
    assert all(e["id"].startswith("urn:li:") for e in body["evidence"])
    meta = body["metadata"]
    assert meta["entities"] == ["fct_payments"]
    assert meta["graph_facts"] > 0
    assert meta["context_chunks"] == 0  # the graph knew: no code excerpts needed
    assert body["model"] == meta["model_used"] == "extractive"


@pytest.mark.spec("LLM-17.2", "LLM-24.3", "LLM-29.1")
def test_deep_intent_puts_graph_paths_before_chunks(service):
    body = _ask(service, "deep", "How is finance_monthly_summary built from fct_refunds?")

    kinds = [e["type"] for e in body["evidence"]]
    assert "graph" in kinds and "chunk" in kinds
    assert kinds == sorted(kinds, key=lambda k: k != "graph"), "graph evidence comes first"
    meta = body["metadata"]
    assert 0 < meta["context_chunks"] <= 10
    assert {"embedding", "retrieval", "graph", "generation", "total"} <= set(meta["latency_ms"])
    assert meta["context_tokens"] > 0


@pytest.mark.spec("LLM-19.2", "LLM-24.5")
def test_semantic_intent_uses_chunks_only_and_warns_on_lineage_questions(service):
    body = _ask(service, "semantic", "What depends on stg_stripe__payments downstream?")

    assert body["evidence"], "chunks were retrieved"
    assert {e["type"] for e in body["evidence"]} == {"chunk"}
    assert len(body["evidence"]) <= 5
    assert "graph" not in body["metadata"]["latency_ms"]
    assert any("/api/chat/deep" in w for w in body["warnings"])


@pytest.mark.spec("LLM-20.2")
def test_text_intent_retrieves_nothing(service):
    body = _ask(service, "text", "How should I name staging models?")

    assert body["evidence"] == []
    meta = body["metadata"]
    assert meta["context_chunks"] == 0 and meta["graph_facts"] == 0
    assert not {"embedding", "retrieval", "graph"} & set(meta["latency_ms"])


@pytest.mark.spec("LLM-21.2")
def test_title_is_three_to_seven_words_with_empty_lists(service):
    body = _ask(service, "title", "which models break if stg_shop__orders changes its grain")

    assert 3 <= len(body["answer"].split()) <= 7
    assert body["evidence"] == [] and body["next_actions"] == [] and body["warnings"] == []


@pytest.mark.spec("LLM-15.1")
def test_response_contract_metadata(service):
    body = _ask(service, "deep", "Where is fct_orders computed?")

    meta = body["metadata"]
    for key in (
        "model_used",
        "priority",
        "fallback_count",
        "latency_ms",
        "context_tokens",
        "context_chunks",
        "action",
        "confidence",
        "citations",
        "route_to",
        "grounded",
        "topic",
    ):
        assert key in meta, key
    assert meta["action"] in ("CITE", "ROUTE")
    assert {"overall", "retrieval_score", "coverage_score", "llm_score"} <= set(meta["confidence"])
    assert "primary_error" not in meta  # LLM-22.2: failures stay server-side
    retrieved = {e["id"] for e in body["evidence"]}
    assert all(c["urn"] in retrieved for c in meta["citations"])


@pytest.mark.spec("LLM-33.1", "LLM-33.2")
def test_stream_sends_tokens_then_a_final_event_equal_to_the_plain_answer(service):
    question = {"query": "What feeds fct_orders?", "project_id": "shop"}
    plain = service.post("/api/chat/graph", json=question).json()
    with service.stream("POST", "/api/chat/graph/stream", json=question) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        events = _sse(reply.iter_lines())
    tokens = [data["text"] for event, data in events if event == "token"]
    finals = [data for event, data in events if event == "final"]
    assert tokens and len(finals) == 1
    final = finals[0]
    assert "".join(tokens) == final["answer"] == plain["answer"]
    assert final["evidence"] == plain["evidence"]
    assert final["metadata"]["citations"] == plain["metadata"]["citations"]


def test_unknown_model_override_is_a_clear_400(service):
    reply = service.post("/api/chat/deep", json={"query": "x", "model": "gpt-9-ultra"})
    assert reply.status_code == 400
    body = reply.json()
    assert body["error"] == "model_not_allowed"
    assert "extractive" in body["message"]


def test_a_bad_stream_request_is_refused_before_the_stream_opens(service):
    reply = service.post("/api/chat/graph/stream", json={"query": "x", "model": "nope"})
    assert reply.status_code == 400
    assert reply.json()["error"] == "model_not_allowed"


def test_empty_query_is_a_422_with_the_field_named(service):
    reply = service.post("/api/chat/semantic", json={"query": ""})
    assert reply.status_code == 422
    assert "query" in reply.json()["message"]


@pytest.mark.spec("PRV-03.1", "PRV-03.2")
def test_follow_up_uses_the_topic_the_previous_answer_returned(service):
    first = _ask(service, "deep", "What feeds finance_monthly_summary?")
    topic = first["metadata"]["topic"]
    assert "finance_monthly_summary" in topic
    assert first["metadata"]["query_strategy"] == "raw_first_message"

    follow = _ask(service, "deep", "and what does it read from?", topic=topic)
    assert follow["metadata"]["query_strategy"] == "accumulated_topic"
    assert follow["evidence"], "the follow-up still found evidence"


def _sse(lines) -> list[tuple[str, dict]]:
    events, event, data = [], "message", []
    for line in lines:
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line and data:
            events.append((event, json.loads("\n".join(data))))
            event, data = "message", []
    return events
