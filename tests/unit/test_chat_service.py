"""ChatService behaviour with the real Gateway and scripted providers (no servers): routing by
intent, malformed output, partial retrieval, memory, streaming errors, budgets, routing to a
tag owner, logging and metrics."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry

from adapters.llm.extractive import ExtractiveProvider
from domain.answering.context import ContextSource, GraphFact
from domain.answering.intents import Intent
from domain.llm import (
    ChainEntry,
    Completion,
    CompletionRequest,
    ModelNotAllowed,
    ProviderUnavailable,
)
from queries.chat import ChatConfig, ChatQuery, ChatService
from queries.gateway import Gateway, GatewayConfig
from queries.model_override import ModelValidator
from queries.retrieval import Retrieval, RetrievalQuery

pytestmark = pytest.mark.unit


def _chunk(n: int, score: float, text: str = "", tags: tuple[str, ...] = ()) -> ContextSource:
    return ContextSource(
        source_id=f"doc-{n:012x}:0",
        urn=f"urn:li:chunk:shop:models/m{n}.sql#0",
        kind="chunk",
        document_id=f"doc-{n:012x}",
        document_name=f"models/m{n}.sql",
        chunk_index=0,
        text=text or f"select * from stg_orders_{n} -- model m{n}",
        score=score,
        chunk_type="sql_select",
        line_start=1,
        line_end=3,
        tags=tags,
    )


def _fact() -> GraphFact:
    return GraphFact(
        source_urn="urn:li:dataset:shop:fct_orders",
        source_name="fct_orders",
        source_kind="dbt_model",
        rel="READS_FROM",
        target_urn="urn:li:dataset:shop:stg_orders",
        target_name="stg_orders",
        target_kind="dbt_model",
        confidence=1.0,
        provenance="deterministic",
        file_path="models/fct_orders.sql",
        line_start=1,
        line_end=9,
    )


def _graph_source() -> ContextSource:
    return ContextSource(
        source_id="doc-aaaaaaaaaaaa:0",
        urn="urn:li:dataset:shop:stg_orders",
        kind="graph",
        document_id="doc-aaaaaaaaaaaa",
        document_name="models/stg_orders.sql",
        chunk_index=0,
        text="stg_orders (dbt_model). fct_orders -[READS_FROM]-> stg_orders",
        score=1.0,
        chunk_type="dbt_model",
        line_start=None,
        line_end=None,
        tags=(),
    )


@dataclass
class ScriptedPipeline:
    """A retrieval pipeline answering what it is given (and recording what it was asked)."""

    name: str
    result: Retrieval = field(default_factory=Retrieval)
    calls: list[RetrievalQuery] = field(default_factory=list)
    description: str = "scripted"

    async def retrieve(self, query: RetrievalQuery) -> Retrieval:
        self.calls.append(query)
        copy = Retrieval(
            sources=list(self.result.sources),
            facts=list(self.result.facts),
            entities=list(self.result.entities),
            warnings=list(self.result.warnings),
            timings_ms=dict(self.result.timings_ms),
        )
        if query.top_k == 0:
            copy.sources = [s for s in copy.sources if s.kind == "graph"]
        return copy


class ScriptedProvider:
    """Answers with the next scripted text, or raises the next scripted error."""

    name = "scripted"

    def __init__(self, *replies: object) -> None:
        self.replies = list(replies)
        self.requests: list[CompletionRequest] = []

    def _next(self) -> object:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    async def complete(self, request: CompletionRequest, model: str) -> Completion:
        self.requests.append(request)
        reply = self._next()
        if isinstance(reply, Exception):
            raise reply
        return Completion(text=str(reply), model=model, provider=self.name)

    async def stream(self, request: CompletionRequest, model: str) -> AsyncIterator[str]:
        self.requests.append(request)
        reply = self._next()
        if isinstance(reply, Exception):
            raise reply
        text = str(reply)
        for i in range(0, len(text), 7):
            yield text[i : i + 7]

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


def _answer(
    text: str = "fct_orders reads from stg_orders.", ids=("urn:li:dataset:shop:stg_orders",)
):
    return json.dumps(
        {
            "answer": text,
            "evidence": [{"type": "graph", "id": i, "note": "edge"} for i in ids],
            "next_actions": ["inspect stg_orders"],
            "warnings": [],
        }
    )


def _service(
    provider: ScriptedProvider,
    retrieval: Retrieval | None = None,
    *,
    vector: Retrieval | None = None,
    owners: dict[str, tuple[str, str | None]] | None = None,
    config: ChatConfig | None = None,
    local_window=None,
    chains: dict[str, list[ChainEntry]] | None = None,
    registry: CollectorRegistry | None = None,
) -> tuple[ChatService, dict[str, ScriptedPipeline]]:
    providers = {"scripted": provider, "extractive": ExtractiveProvider()}
    gateway = Gateway(
        providers,
        config=GatewayConfig(base_delay=0.0),
        registry=registry or CollectorRegistry(),
        sleep=_no_sleep,
    )
    pipelines = {
        "hybrid": ScriptedPipeline("hybrid", retrieval or Retrieval()),
        "vector": ScriptedPipeline("vector", vector or retrieval or Retrieval()),
    }

    def chain(usage: str) -> list[ChainEntry]:
        if chains is not None:
            return chains[usage]
        return [ChainEntry(f"model-{usage}", "scripted", 1)]

    service = ChatService(
        pipelines=pipelines,  # type: ignore[arg-type]
        gateway=gateway,
        chains=chain,
        model_validator=ModelValidator(
            lambda: [{"model_id": "model-known", "provider": "scripted", "priority": 1}], None
        ),
        free_tier=None,
        edge_exists=lambda *_: False,
        owner_of=lambda _tenant, tag: (owners or {}).get(tag),
        config=config or ChatConfig(llm_confidence=False),
        registry=registry or CollectorRegistry(),
        local_window=local_window,
    )
    return service, pipelines


async def _no_sleep(_: float) -> None:
    return None


def _retrieval(chunks: int = 3, **kwargs) -> Retrieval:
    return Retrieval(
        sources=[_graph_source(), *(_chunk(i, 0.8 - i / 100) for i in range(chunks))],
        facts=[_fact()],
        entities=["fct_orders"],
        timings_ms={"embedding": 1.0, "retrieval": 2.0, "graph": 3.0},
        **kwargs,
    )


@pytest.mark.spec("LLM-24.1")
@pytest.mark.parametrize("intent", list(Intent))
async def test_each_intent_runs_its_own_usage_type_chain(intent):
    provider = ScriptedProvider(_answer("Orders Pipeline Lineage Overview"))
    service, _ = _service(provider, _retrieval())
    body = (await service.answer(ChatQuery(query="What feeds fct_orders?", intent=intent))).body
    assert body["model"] == f"model-chat_{intent.value}"
    system = provider.requests[0].messages[0].content
    assert f"Additional rules for {intent.value.upper()}" in system


@pytest.mark.spec("LLM-16.2", "LLM-03.3")
async def test_json_without_the_contract_keys_gets_the_safe_fallback_and_is_counted():
    registry = CollectorRegistry()
    provider = ScriptedProvider(json.dumps({"text": "I think it is orders"}))
    service, _ = _service(provider, _retrieval(), registry=registry)
    body = (
        await service.answer(ChatQuery(query="What feeds fct_orders?", intent=Intent.DEEP))
    ).body
    assert body["evidence"] == []
    assert any("malformed" in w.lower() or "could not" in w.lower() for w in body["warnings"])
    counted = registry.get_sample_value(
        "chat_malformed_response_count_total",
        {"endpoint": "/api/chat/deep", "model": "model-chat_deep"},
    )
    assert counted == 1.0


@pytest.mark.spec("LLM-16.2")
async def test_every_model_answering_prose_is_a_safe_fallback_not_a_503():
    provider = ScriptedProvider("Sure! fct_orders comes from stg_orders.")
    service, _ = _service(provider, _retrieval())
    body = (
        await service.answer(ChatQuery(query="What feeds fct_orders?", intent=Intent.GRAPH))
    ).body
    assert body["answer"] and body["evidence"] == []
    assert body["metadata"]["action"] in ("CITE", "ROUTE")


@pytest.mark.spec("LLM-29.2")
async def test_a_failed_graph_lookup_still_answers_from_vectors_with_a_warning():
    partial = Retrieval(
        sources=[_chunk(1, 0.9)],
        warnings=["Graph lookup failed (TimeoutError); the answer uses vector evidence only."],
        timings_ms={"embedding": 1.0, "retrieval": 2.0},
    )
    provider = ScriptedProvider(_answer("m1 selects from stg_orders_1", ids=[_chunk(1, 0.9).urn]))
    service, _ = _service(provider, partial)
    body = (await service.answer(ChatQuery(query="what feeds m1", intent=Intent.DEEP))).body
    assert [e["id"] for e in body["evidence"]] == [_chunk(1, 0.9).urn]
    assert any("Graph lookup failed" in w for w in body["warnings"])


@pytest.mark.spec("LLM-32.1")
async def test_skip_memory_ignores_history_and_topic():
    provider = ScriptedProvider(_answer())
    service, pipelines = _service(provider, _retrieval())
    query = ChatQuery(
        query="and what does it read?",
        intent=Intent.DEEP,
        chat_history=(("user", "tell me about finance_monthly_summary"),),
        topic="finance_monthly_summary",
        skip_memory=True,
    )
    body = (await service.answer(query)).body
    prompt = provider.requests[0].messages[1].content
    assert "finance_monthly_summary" not in prompt
    assert pipelines["hybrid"].calls[0].text == "and what does it read?"
    assert body["metadata"]["query_strategy"] == "raw_first_message"


@pytest.mark.spec("LLM-32.2")
async def test_first_message_has_no_history_section_and_embeds_the_question_raw():
    provider = ScriptedProvider(_answer())
    service, pipelines = _service(provider, _retrieval())
    await service.answer(ChatQuery(query="What feeds fct_orders?", intent=Intent.DEEP))
    assert "## Conversation History" not in provider.requests[0].messages[1].content
    assert pipelines["hybrid"].calls[0].text == "What feeds fct_orders?"


@pytest.mark.spec("LLM-33.3")
async def test_stream_error_after_every_model_fails_is_raised_for_the_error_event():
    provider = ScriptedProvider(
        ProviderUnavailable("Service unavailable (503)", provider="scripted", model="m")
    )
    service, _ = _service(provider, _retrieval())
    events = []
    with pytest.raises(Exception) as raised:
        async for event in service.stream(ChatQuery(query="x y z", intent=Intent.GRAPH)):
            events.append(event)
    assert type(raised.value).__name__ == "AllModelsFailed"
    assert not [e for e in events if e["event"] == "final"]


@pytest.mark.spec("LLM-33.2")
async def test_stream_final_equals_the_plain_answer():
    provider = ScriptedProvider(_answer('fct_orders "reads" from stg_orders.'))
    service, _ = _service(provider, _retrieval())
    query = ChatQuery(query="What feeds fct_orders?", intent=Intent.GRAPH)
    plain = (await service.answer(query)).body
    events = [e async for e in service.stream(query)]
    tokens = "".join(e["data"]["text"] for e in events if e["event"] == "token")
    final = next(e["data"] for e in events if e["event"] == "final")
    assert tokens == final["answer"] == plain["answer"] == 'fct_orders "reads" from stg_orders.'
    assert final["evidence"] == plain["evidence"]


@pytest.mark.spec("LLM-28.1")
async def test_deep_context_over_budget_keeps_graph_and_warns_with_counts():
    big = "select " + ", ".join(f"col_{i}" for i in range(400)) + " from stg_orders"
    chunks = [_chunk(i, 0.9 - i / 100, text=big) for i in range(8)]
    retrieval = Retrieval(sources=[_graph_source(), *chunks], facts=[_fact()], entities=["x"])
    provider = ScriptedProvider(_answer())
    service, _ = _service(
        provider, retrieval, config=ChatConfig(deep_context_tokens=3000, llm_confidence=False)
    )
    body = (
        await service.answer(ChatQuery(query="What feeds fct_orders?", intent=Intent.DEEP))
    ).body
    warning = [w for w in body["warnings"] if w.startswith("Context truncated:")]
    assert warning and "chunks omitted due to token limit" in warning[0]
    assert body["metadata"]["graph_facts"] == 1
    assert body["metadata"]["context_chunks"] < 8


@pytest.mark.spec("LLM-35.1")
async def test_local_model_prompt_is_trimmed_to_eighty_percent_of_its_window(caplog):
    big = "select " + ", ".join(f"col_{i}" for i in range(300)) + " from stg_orders"
    chunks = [_chunk(i, 0.9 - i / 100, text=big) for i in range(6)]
    retrieval = Retrieval(sources=chunks, entities=[])
    chains = {"chat_semantic": [ChainEntry("llama3.1:8b", "ollama", 1)]}
    ollama = ScriptedProvider(_answer(ids=()))
    ollama.name = "ollama"
    service, _ = _service(ollama, retrieval, local_window=lambda: 4096, chains=chains)
    service.gateway.providers["ollama"] = ollama
    with caplog.at_level(logging.INFO, logger="upstream.chat"):
        body = (await service.answer(ChatQuery(query="orders?", intent=Intent.SEMANTIC))).body
    assert body["metadata"]["context_chunks"] < 5
    assert any("trimmed for the local model" in r.message for r in caplog.records)
    lowest_kept = (
        min(c["relevance_score"] for c in body["metadata"]["citations"])
        if body["metadata"]["citations"]
        else None
    )
    assert lowest_kept is None or lowest_kept >= 0.86


@pytest.mark.spec("LLM-04.2", "LLM-35.3")
async def test_top_k_over_ten_uses_tree_summarize_and_keeps_every_groups_citations():
    chunks = [_chunk(i, 0.95 - i / 100) for i in range(12)]
    retrieval = Retrieval(sources=chunks, entities=[])
    service, _ = _service(ExtractiveProvider(), retrieval)  # type: ignore[arg-type]
    service.gateway.providers["scripted"] = ExtractiveProvider()  # type: ignore[assignment]
    body = (await service.answer(ChatQuery(query="orders?", intent=Intent.DEEP, top_k=12))).body
    assert body["metadata"]["synthesis"] == "tree_summarize"
    assert {e["id"] for e in body["evidence"]} == {c.urn for c in chunks}
    small = (await service.answer(ChatQuery(query="orders?", intent=Intent.DEEP, top_k=10))).body
    assert small["metadata"]["synthesis"] == "compact"


@pytest.mark.spec("RAG-24")
async def test_low_confidence_routes_to_the_owner_of_the_most_common_tag():
    chunks = [_chunk(i, 0.1, tags=("finance",)) for i in range(3)]
    retrieval = Retrieval(sources=chunks, entities=[])
    provider = ScriptedProvider(_answer("Something unrelated entirely.", ids=()))
    service, _ = _service(provider, retrieval, owners={"finance": ("u-7", "fin@corp.example")})
    body = (await service.answer(ChatQuery(query="orders?", intent=Intent.SEMANTIC))).body
    meta = body["metadata"]
    assert meta["action"] == "ROUTE"
    assert meta["route_to"]["tag"] == "finance"
    assert meta["route_to"]["owner_email"] == "fin@corp.example"
    assert meta["route_to"]["fallback"] is False


@pytest.mark.spec("RAG-25")
async def test_no_context_answers_with_low_confidence_and_routes_to_admin():
    service, _ = _service(ExtractiveProvider(), Retrieval())  # type: ignore[arg-type]
    service.gateway.providers["scripted"] = ExtractiveProvider()  # type: ignore[assignment]
    body = (await service.answer(ChatQuery(query="payroll?", intent=Intent.SEMANTIC))).body
    meta = body["metadata"]
    assert body["evidence"] == [] and meta["context_chunks"] == 0
    assert meta["action"] == "ROUTE" and meta["route_to"]["fallback"] is True
    assert meta["grounded"] is False


@pytest.mark.spec("RAG-09")
async def test_an_unconfigured_model_override_is_a_typed_400_error():
    service, _ = _service(ScriptedProvider(_answer()), _retrieval())
    with pytest.raises(ModelNotAllowed) as raised:
        await service.answer(ChatQuery(query="q", intent=Intent.TEXT, model="gpt-x"))
    assert "model-known" in raised.value.message


@pytest.mark.spec("LLM-07.1")
async def test_each_query_logs_question_sources_latency_and_at_debug_prompt_and_answer(caplog):
    service, _ = _service(ScriptedProvider(_answer()), _retrieval())
    with caplog.at_level(logging.DEBUG, logger="upstream.chat"):
        await service.answer(ChatQuery(query="What feeds fct_orders?", intent=Intent.DEEP))
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("What feeds fct_orders?" in m and "urn:li:" in m and "latency_ms" in m for m in info)
    assert any("prompt=" in m for m in debug) and any("response=" in m for m in debug)


@pytest.mark.spec("LLM-07.2")
async def test_stage_latencies_are_recorded_as_metrics():
    registry = CollectorRegistry()
    service, _ = _service(ScriptedProvider(_answer()), _retrieval(), registry=registry)
    await service.answer(ChatQuery(query="What feeds fct_orders?", intent=Intent.DEEP))
    for stage in ("embedding", "retrieval", "graph", "generation", "total"):
        count = registry.get_sample_value(
            "chat_stage_seconds_count", {"intent": "deep", "stage": stage}
        )
        assert count == 1.0, stage


@pytest.mark.spec("LLM-08.1", "LLM-08.2")
async def test_the_pipeline_comes_from_configuration_or_the_request():
    provider = ScriptedProvider(_answer())
    service, pipelines = _service(
        provider, _retrieval(), config=ChatConfig(default_pipeline="vector", llm_confidence=False)
    )
    body = (await service.answer(ChatQuery(query="q about fct_orders", intent=Intent.DEEP))).body
    assert body["metadata"]["pipeline"] == "vector"
    assert len(pipelines["vector"].calls) == 1 and not pipelines["hybrid"].calls
    body = (
        await service.answer(
            ChatQuery(query="q about fct_orders", intent=Intent.DEEP, pipeline="hybrid")
        )
    ).body
    assert body["metadata"]["pipeline"] == "hybrid"
    assert len(pipelines["hybrid"].calls) == 1


@pytest.mark.spec("CFG-09", "CFG-05.2")
async def test_chat_has_no_hardcoded_models_without_configuration_it_is_a_503():
    from domain.model_config import ModelSelectionUnavailable, not_configured

    def unconfigured(usage: str) -> list[ChainEntry]:
        raise not_configured(usage)

    provider = ScriptedProvider(_answer())
    service, _ = _service(provider, _retrieval())
    service.chains = unconfigured
    with pytest.raises(ModelSelectionUnavailable) as raised:
        await service.answer(ChatQuery(query="What feeds fct_orders?", intent=Intent.DEEP))
    body = raised.value.body()
    assert body["usage_type"] == "chat_deep" and "Configure" in body["action"]
    assert provider.requests == []  # no model was called: there is no hard-coded fallback


@pytest.mark.spec("RAG-01")
def test_rag_configuration_defaults_and_environment(monkeypatch):
    from adapters.settings import Settings

    defaults = Settings()
    assert (defaults.rag_max_context_tokens, defaults.rag_max_history_tokens) == (3000, 1000)
    assert defaults.rag_max_response_tokens == 1024
    assert (defaults.rag_min_similarity_score, defaults.rag_max_chunks_per_doc) == (0.3, 3)
    assert defaults.rag_chunk_overlap_threshold == 0.9
    assert defaults.rag_confidence_threshold == 60
    monkeypatch.setenv("RAG_CONFIDENCE_THRESHOLD", "75")
    monkeypatch.setenv("RAG_MAX_CONTEXT_TOKENS", "1200")
    configured = Settings()
    assert (configured.rag_confidence_threshold, configured.rag_max_context_tokens) == (75, 1200)


@pytest.mark.spec("RAG-01")
async def test_the_context_token_budget_drops_the_lowest_scored_chunks():
    text = "select " + ", ".join(f"col_{i}" for i in range(150)) + " from stg_orders"
    chunks = [_chunk(i, 0.9 - i / 100, text=text) for i in range(6)]
    service, _ = _service(
        ScriptedProvider(_answer(ids=())),
        Retrieval(sources=chunks),
        config=ChatConfig(context_tokens=1000, llm_confidence=False),
    )
    body = (await service.answer(ChatQuery(query="orders?", intent=Intent.SEMANTIC))).body
    kept = body["metadata"]["context_chunks"]
    assert 0 < kept < 5
    assert any(w.startswith("Context truncated:") for w in body["warnings"])
