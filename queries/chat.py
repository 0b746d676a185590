"""The five intent-routed chat endpoints: retrieve, budget, prompt, generate, ground, score.

One `ChatService.answer` (and its streaming twin `ChatService.stream`) serves deep, graph,
semantic, text and title. Everything it reads is a read model (vectors, the lineage graph, the
model configurations); the model is whatever the intent's usage_type chain names, run by the
gateway. What it returns is the response contract:

    {answer, evidence: [{type, id, note}], next_actions, warnings, model, metadata}

with URNs as evidence ids, deterministic citations mapped from the retrieved context, a hybrid
confidence, and CITE or ROUTE.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from domain.answering.budget import TokenBudget, count_tokens, fit_chunks, fit_deep_context
from domain.answering.confidence import (
    action_for,
    hybrid_confidence,
    parse_llm_score,
    route_target,
)
from domain.answering.context import ContextSource, GraphFact, render_context
from domain.answering.grounding import check_grounding
from domain.answering.intents import Intent, mentions_lineage, profile, usage_type
from domain.answering.parsing import clamp_title, parse_answer, safe_fallback
from domain.answering.prompts import confidence_prompt, grounded_system_prompt
from domain.answering.synthesis import merge_partials, synthesis_mode, tree_groups
from domain.answering.topic import accumulate_topic, retrieval_text
from domain.errors import InvalidCommand
from domain.llm import (
    AllModelsFailed,
    ChainEntry,
    ChatMessage,
    CompletionRequest,
    EvidenceItem,
    ModelNotAllowed,
)
from queries.free_tier import EnforcedChain, FreeTierPolicy, enforce_chain
from queries.retrieval import Retrieval, RetrievalPipeline, RetrievalQuery

log = logging.getLogger("upstream.chat")

MAX_TOP_K = 50
SEMANTIC_LINEAGE_WARNING = (
    "This looks like a lineage question, but the semantic endpoint does not read the lineage "
    "graph: ask /api/chat/deep or /api/chat/graph for authoritative lineage."
)


class UnknownPipeline(InvalidCommand):
    code = "unknown_pipeline"
    hint = "Use one of the pipelines listed by GET /health (rag.pipelines)."


class InvalidChatRequest(InvalidCommand):
    code = "invalid_chat_request"
    hint = "Send a non-empty `query`; `top_k` between 1 and 50."


@dataclass(frozen=True, slots=True)
class ChatQuery:
    """One chat request (the HTTP body, the CLI's `ask`, or the evaluation harness)."""

    query: str
    intent: Intent
    project_id: str | None = None
    tenant_id: str = "default"
    user_tags: tuple[str, ...] = ()
    chat_history: tuple[tuple[str, str], ...] = ()
    skip_memory: bool = False
    model: str | None = None
    top_k: int | None = None
    topic: str | None = None
    pipeline: str | None = None
    rerank: bool = False


@dataclass(frozen=True, slots=True)
class ChatConfig:
    confidence_threshold: int = 60
    admin_email: str = "admin@localhost"
    default_pipeline: str = "hybrid"
    deep_context_tokens: int = 8000
    llm_confidence: bool = True
    response_tokens: int = 1024
    context_tokens: int = 3000  # retrieved context, all intents but deep (RAG_MAX_CONTEXT_TOKENS)
    history_tokens: int = 1000  # chat history (RAG_MAX_HISTORY_TOKENS)
    temperatures: dict[str, float] = field(default_factory=dict)


class ChainCache:
    """The chains of the model_configs read model, re-read only when its position moves (a
    DuckDB query per request costs milliseconds)."""

    def __init__(self, model_configs: Any, version: Callable[[], int]) -> None:
        self.model_configs = model_configs
        self.version = version
        self._at: int | None = None
        self._chains: dict[str, list[ChainEntry]] = {}

    def _fresh(self) -> None:
        now = self.version()
        if now != self._at:
            self._at, self._chains = now, {}

    def chain(self, usage: str) -> list[ChainEntry]:
        """The enabled chain, or the spec's 503 errors (never cached)."""
        self._fresh()
        if usage not in self._chains:
            rows = self.model_configs.get_fallback_chain(usage)
            self._chains[usage] = [ChainEntry.from_row(r) for r in rows]
        return list(self._chains[usage])


@dataclass
class ChatAnswer:
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class ChatMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        reg = registry if registry is not None else CollectorRegistry()
        self.requests = Counter(
            "chat_requests", "Chat requests answered", ["intent", "action", "cache"], registry=reg
        )
        self.stage = Histogram(
            "chat_stage_seconds",
            "Time per chat stage (embedding, retrieval, graph, generation, total)",
            ["intent", "stage"],
            registry=reg,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 90),
        )
        self.unsupported = Counter(
            "chat_unsupported_claim_count",
            "Answer claims not supported by the retrieved context or the graph",
            ["intent"],
            registry=reg,
        )


@dataclass
class _Prepared:
    """Everything decided before generation (shared by the plain and streaming paths)."""

    query: ChatQuery
    pipeline: str
    retrieval: Retrieval
    chunks: list[ContextSource]
    facts: list[GraphFact]
    sources: list[ContextSource]
    context: str
    history: str
    messages: tuple[ChatMessage, ...]
    chain: EnforcedChain
    warnings: list[str]
    topic: str
    strategy: str
    synthesis: str
    context_tokens: int
    started: float


class ChatService:
    """Answers chat questions from the read models through the gateway."""

    def __init__(
        self,
        *,
        pipelines: dict[str, RetrievalPipeline],
        gateway: Any,
        chains: Callable[[str], list[ChainEntry]],
        free_tier: FreeTierPolicy | None,
        edge_exists: Callable[[str, str, str, str | None], bool],
        owner_of: Callable[[str, str], tuple[str, str | None] | None],
        config: ChatConfig | None = None,
        registry: CollectorRegistry | None = None,
        answer_cache: Any = None,
        chain_version: Callable[[], str] = lambda: "0",
        local_window: Callable[[], int] | None = None,
        model_validator: Any = None,
    ) -> None:
        self.pipelines = pipelines
        self.gateway = gateway
        self.chains = chains
        self.model_validator = model_validator
        self.free_tier = free_tier
        self.edge_exists = edge_exists
        self.owner_of = owner_of
        self.config = config or ChatConfig()
        self.metrics = ChatMetrics(registry)
        self.answer_cache = answer_cache
        self.chain_version = chain_version
        self.local_window = local_window
        if self.config.default_pipeline not in pipelines:
            raise UnknownPipeline(
                f"RAG_PIPELINE={self.config.default_pipeline!r} is not one of "
                f"{', '.join(sorted(pipelines))}"
            )

    # --- public ------------------------------------------------------------------------

    async def answer(self, query: ChatQuery) -> ChatAnswer:
        started = time.perf_counter()
        self._validate(query)
        cached = await self._cached(query)
        if cached is not None:
            return cached
        prepared = await self._prepare(query, started)
        endpoint = f"/api/chat/{query.intent}"
        usage = usage_type(query.intent)
        generation_began = time.perf_counter()
        if prepared.synthesis == "tree_summarize":
            result, data = await self._tree_summarize(prepared, usage, endpoint)
        else:
            try:
                result = await self.gateway.complete(
                    usage, prepared.chain.entries, self._request(prepared), endpoint
                )
                data = _parse(result.text)
            except AllModelsFailed as exc:
                result = _unreadable(exc)  # every model answered, none in JSON: safe fallback
                data = None
        generation_ms = (time.perf_counter() - generation_began) * 1000
        body = await self._finish(prepared, result, data, generation_ms, endpoint)
        await self._store(query, prepared, body)
        return ChatAnswer(body, prepared.chain.headers())

    async def stream(self, query: ChatQuery) -> AsyncIterator[dict[str, Any]]:
        """SSE events: `token` (answer text as it is generated), then `final` (the whole
        response, equal to what `answer` returns) or `error`."""
        started = time.perf_counter()
        self._validate(query)
        cached = await self._cached(query)
        if cached is not None:
            yield {"event": "token", "data": {"text": cached.body["answer"]}}
            yield {"event": "final", "data": cached.body, "headers": cached.headers}
            return
        prepared = await self._prepare(query, started)
        endpoint = f"/api/chat/{query.intent}/stream"
        usage = usage_type(query.intent)
        began = time.perf_counter()
        if prepared.synthesis == "tree_summarize":
            result, data = await self._tree_summarize(prepared, usage, endpoint)
            yield {"event": "token", "data": {"text": (data or {}).get("answer", "")}}
        else:
            opened = await self.gateway.stream(
                usage, prepared.chain.entries, self._request(prepared), endpoint
            )
            extractor = AnswerFieldExtractor()
            parts: list[str] = []
            async for delta in opened:
                parts.append(delta)
                piece = extractor.feed(delta)
                if piece:
                    yield {"event": "token", "data": {"text": piece}}
            text = "".join(parts)
            result = _StreamResult.of(opened, text)
            data = _parse(text)  # None: the final event carries the safe fallback
        generation_ms = (time.perf_counter() - began) * 1000
        body = await self._finish(prepared, result, data, generation_ms, endpoint)
        await self._store(query, prepared, body)
        yield {"event": "final", "data": body, "headers": prepared.chain.headers()}

    async def precheck(self, query: ChatQuery) -> dict[str, str]:
        """Refuse a bad request before a stream opens (so it gets its HTTP status), and the
        response headers the chain decides (a free-tier downgrade)."""
        self._validate(query)
        return (await self._chain(query)).headers()

    def pipeline_names(self) -> list[str]:
        return sorted(self.pipelines)

    # --- preparation ---------------------------------------------------------------------

    def _validate(self, query: ChatQuery) -> None:
        if not query.query.strip():
            raise InvalidChatRequest("`query` is empty")
        if query.top_k is not None and not 1 <= query.top_k <= MAX_TOP_K:
            raise InvalidChatRequest(f"`top_k` must be between 1 and {MAX_TOP_K}")
        if query.pipeline and query.pipeline not in self.pipelines:
            raise UnknownPipeline(
                f"no retrieval pipeline named {query.pipeline!r}; "
                f"known: {', '.join(sorted(self.pipelines))}"
            )

    async def _prepare(self, query: ChatQuery, started: float) -> _Prepared:
        intent = query.intent
        shape = profile(intent)
        chain = await self._chain(query)
        topic_in = None if query.skip_memory else query.topic
        text, strategy = retrieval_text(query.query, topic_in)
        topic = accumulate_topic(topic_in, query.query)
        pipeline = query.pipeline or self.config.default_pipeline
        if not shape.uses_graph:
            pipeline = "vector"  # semantic: chunks only, whatever the default
        top_k = query.top_k or shape.top_k
        retrieval = await self._retrieve(query, shape, pipeline, text, top_k)
        warnings = list(retrieval.warnings)
        if intent == Intent.SEMANTIC and mentions_lineage(query.query) and not retrieval.facts:
            warnings.append(SEMANTIC_LINEAGE_WARNING)
        primary = chain.entries[0].model_id if chain.entries else ""
        system = grounded_system_prompt(intent)
        history_pairs = [] if query.skip_memory else list(query.chat_history)
        budget = self._budget(primary, intent).allocate(system, history_pairs, retrieval.chunks)
        chunks, facts = list(budget.chunks), list(retrieval.facts)
        if budget.dropped_chunks:
            warnings.append(
                f"Context truncated: {budget.dropped_chunks} chunks omitted due to token limit"
            )
        if intent == Intent.DEEP:
            fitted = fit_deep_context(facts, chunks, self.config.deep_context_tokens)
            facts, chunks = list(fitted.facts), list(fitted.chunks)
            if fitted.warning:
                warnings.append(fitted.warning)
                log.info(
                    "deep context truncated: %d -> %d chunks",
                    len(retrieval.chunks),
                    len(chunks),
                )
        if chain.entries and chain.entries[0].provider == "ollama" and self.local_window:
            chunks = self._fit_local_window(query.query, system, budget, chunks, warnings)
        kept = {c.urn for c in chunks}
        sources = [s for s in retrieval.sources if s.kind == "graph" or s.urn in kept]
        mode = synthesis_mode(top_k) if shape.uses_vectors else "compact"
        if shape.uses_vectors or shape.uses_graph:
            context = render_context(
                chunks,
                facts,
                query.query,
                graph_authoritative=shape.graph_authoritative,
                history=budget.history,
            )
        else:
            context = _plain_question(query.query, budget.history)
        messages = (
            ChatMessage("system", system),
            ChatMessage("user", context),
        )
        return _Prepared(
            query=query,
            pipeline=pipeline,
            retrieval=retrieval,
            chunks=chunks,
            facts=facts,
            sources=sources,
            context=context,
            history=budget.history,
            messages=messages,
            chain=chain,
            warnings=warnings,
            topic=topic,
            strategy=strategy,
            synthesis=mode,
            context_tokens=count_tokens(context),
            started=started,
        )

    def _budget(self, model: str, intent: Intent) -> TokenBudget:
        """The model's window; deep's context is capped by its own budget (fit_deep_context)."""
        cap = None if intent == Intent.DEEP else self.config.context_tokens
        budget = TokenBudget(model, max_context_tokens=cap)
        history = min(budget.limits.max_history, self.config.history_tokens)
        budget.limits = replace(budget.limits, max_history=history)
        return budget

    def _fit_local_window(
        self,
        question: str,
        system: str,
        budget: Any,
        chunks: list[ContextSource],
        warnings: list[str],
    ) -> list[ContextSource]:
        """LLM-35.1: a local model's prompt (context + query + response buffer) stays under
        80% of the window Ollama's memory allows; lowest-relevance chunks go first."""
        assert self.local_window is not None
        window = int(self.local_window() * 0.8)
        fixed = (
            budget.system_tokens
            + budget.history_tokens
            + count_tokens(question)
            + self.config.response_tokens
        )
        used = sum(count_tokens(c.text) for c in chunks)
        if fixed + used <= window:
            return chunks
        kept, _ = fit_chunks(chunks, max(0, window - fixed))
        log.info(
            "context trimmed for the local model: %d -> %d chunks (window %d tokens)",
            len(chunks),
            len(kept),
            window,
        )
        warnings.append(
            f"Context trimmed to the local model's window: {len(chunks) - len(kept)} chunks omitted"
        )
        return kept

    async def _retrieve(
        self, query: ChatQuery, shape: Any, pipeline_name: str, text: str, top_k: int
    ) -> Retrieval:
        if not (shape.uses_vectors or shape.uses_graph):
            return Retrieval()
        request = RetrievalQuery(
            text=text,
            intent=str(query.intent),
            project_id=query.project_id,
            tenant_id=query.tenant_id,
            user_tags=query.user_tags,
            top_k=top_k if shape.uses_vectors else 0,
            hops=shape.graph_hops,
            question=query.query,
            rerank=query.rerank,
        )
        if query.intent == Intent.GRAPH:
            return await self._graph_first(request, top_k)
        name = pipeline_name if shape.uses_graph else "vector"
        return await self.pipelines[name].retrieve(request)

    async def _graph_first(self, request: RetrievalQuery, top_k: int) -> Retrieval:
        """Graph intent: the graph is authoritative; chunks only when it knows nothing."""
        hybrid = self.pipelines.get("hybrid") or next(iter(self.pipelines.values()))
        graph_only = replace(request, top_k=0, include_entities=False)
        retrieval = await hybrid.retrieve(graph_only)
        if retrieval.facts:
            return retrieval
        support = await self.pipelines["vector"].retrieve(replace(request, top_k=top_k))
        support.warnings = [
            *retrieval.warnings,
            *support.warnings,
            "No lineage-graph evidence matched this question; the answer rests on code "
            "excerpts only.",
        ]
        support.timings_ms.update({"graph": retrieval.timings_ms.get("graph", 0.0)})
        support.entities = retrieval.entities
        support.entity_urns = retrieval.entity_urns
        return support

    async def _chain(self, query: ChatQuery) -> EnforcedChain:
        usage = usage_type(query.intent)
        chain = list(self.chains(usage))
        if query.model:
            if self.model_validator is None:
                raise ModelNotAllowed(f"model {query.model!r}: no model can be chosen here")
            chain = await self.model_validator.chain_with_override(usage, chain, query.model)
        if self.free_tier is None:
            return EnforcedChain(chain, ())
        return await enforce_chain(self.free_tier, chain, context=f"/api/chat/{query.intent}")

    def _request(
        self,
        prepared: _Prepared,
        messages: Sequence[ChatMessage] | None = None,
        sources: Sequence[ContextSource] | None = None,
    ) -> CompletionRequest:
        intent = prepared.query.intent
        return CompletionRequest(
            messages=tuple(messages or prepared.messages),
            max_tokens=self.config.response_tokens,
            temperature=self.config.temperatures.get(str(intent), 0.2),
            response_format="json_object",
            evidence=tuple(_evidence_item(s) for s in (sources or prepared.sources)),
        )

    # --- generation helpers ----------------------------------------------------------

    async def _tree_summarize(
        self, prepared: _Prepared, usage: str, endpoint: str
    ) -> tuple[Any, dict[str, Any] | None]:
        """top_k > 10: answer per group of chunks, then merge (citations carried through)."""
        groups = tree_groups(prepared.chunks, max(512, self.config.deep_context_tokens // 4))
        partials: list[dict[str, Any]] = []
        result: Any = None
        system = prepared.messages[0]
        for group in groups:
            context = render_context(
                group,
                prepared.facts,
                prepared.query.query,
                graph_authoritative=profile(prepared.query.intent).graph_authoritative,
                history=prepared.history,
            )
            group_sources = [s for s in prepared.sources if s.kind == "graph"] + list(group)
            request = self._request(prepared, (system, ChatMessage("user", context)), group_sources)
            result = await self.gateway.complete(usage, prepared.chain.entries, request, endpoint)
            parsed = _parse(result.text)
            if parsed is not None:
                partials.append(parsed)
        merged = merge_partials(partials) if partials else None
        return result, merged

    async def _llm_score(self, prepared: _Prepared, answer: str, provider: str) -> int | None:
        if not self.config.llm_confidence or provider == "extractive":
            return None
        prompt = confidence_prompt(prepared.context[:4000], prepared.query.query, answer)
        request = CompletionRequest(
            messages=(ChatMessage("user", prompt),), max_tokens=8, temperature=0.0
        )
        try:
            result = await self.gateway.complete(
                usage_type(prepared.query.intent),
                prepared.chain.entries,
                request,
                f"/api/chat/{prepared.query.intent}#confidence",
            )
        except Exception as exc:  # the score is optional: never fail the answer for it
            log.info("confidence self-rating unavailable: %s", exc)
            return None
        return parse_llm_score(result.text)

    # --- finishing -------------------------------------------------------------------

    async def _finish(
        self,
        prepared: _Prepared,
        result: Any,
        data: dict[str, Any] | None,
        generation_ms: float,
        endpoint: str,
    ) -> dict[str, Any]:
        query = prepared.query
        warnings = list(prepared.warnings)
        if data is None:
            if not getattr(result, "counted", False):  # the gateway counted its own failures
                log.warning(
                    "malformed model output model=%s endpoint=%s raw=%r",
                    result.model_used,
                    endpoint,
                    result.text[:2000],
                )
                self.gateway.metrics.malformed.labels(endpoint, result.model_used).inc()
            data = safe_fallback("the model's output was not the required JSON object")
        answer = str(data.get("answer", ""))
        if query.intent == Intent.TITLE:
            answer = clamp_title(answer)
            data = {**data, "evidence": [], "next_actions": [], "warnings": []}
        evidence_ids = [str(e.get("id", "")) for e in data.get("evidence", [])]
        graph_ids = {f.source_urn for f in prepared.facts} | {f.target_urn for f in prepared.facts}
        grounding = check_grounding(
            answer,
            evidence_ids,
            prepared.sources,
            self._edge_checker(prepared),
            graph_ids=graph_ids,
        )
        cited = grounding.citations
        warnings.extend(grounding.warnings)
        if grounding.unsupported_edges:
            self.metrics.unsupported.labels(str(query.intent)).inc(len(grounding.unsupported_edges))
        evidence = _evidence(data, prepared.sources, cited)
        llm_score = await self._llm_score(prepared, answer, result.provider)
        scores = [s.score for s in prepared.chunks] + [f.confidence for f in prepared.facts]
        confidence = hybrid_confidence(scores, answer, prepared.context, llm_score)
        if grounding.penalty:
            confidence = confidence.penalized(grounding.penalty)
        overall = confidence.overall
        retrieval_used = bool(prepared.sources)
        text_only = query.intent in (Intent.TEXT, Intent.TITLE)
        action = "CITE" if text_only else action_for(overall, self.config.confidence_threshold)
        route = None
        if action == "ROUTE":
            route = route_target(
                [s.tags for s in prepared.chunks],
                lambda tag: self.owner_of(query.tenant_id, tag),
                self.config.admin_email,
                overall,
            )
        server = getattr(result, "server_metadata", None)
        if server is not None and result.fallback_count:
            log.info("chat %s model usage %s", query.intent, server())  # primary error: here only
        model_warnings = [str(w) for w in data.get("warnings", [])]
        timings = dict(prepared.retrieval.timings_ms)
        timings["generation"] = round(generation_ms, 3)
        timings["total"] = round((time.perf_counter() - prepared.started) * 1000, 3)
        metadata: dict[str, Any] = {
            "intent": str(query.intent),
            "pipeline": None if text_only else prepared.pipeline,
            **_client_safe(result),
            "latency_ms": timings,
            "context_tokens": prepared.context_tokens,
            "context_chunks": len(prepared.chunks),
            "graph_facts": len(prepared.facts),
            "entities": prepared.retrieval.entities,
            "action": action,
            "confidence": confidence.to_dict(),
            "citations": [c.to_dict() for c in cited.citations],
            "route_to": route.to_dict() if route else None,
            "grounded": bool(grounding.grounded and retrieval_used and not text_only),
            "topic": prepared.topic,
            "query_strategy": prepared.strategy,
            "synthesis": prepared.synthesis,
            "cache": None,
            **prepared.chain.metadata(),
        }
        body = {
            "answer": answer,
            "evidence": evidence,
            "next_actions": [str(a) for a in data.get("next_actions", [])],
            "warnings": _unique([*model_warnings, *warnings]),
            "model": result.model_used,
            "metadata": metadata,
        }
        self._observe(prepared, body, timings)
        return body

    def _edge_checker(self, prepared: _Prepared) -> Callable[[str, str], bool]:
        known = {(f.source_name.lower(), f.target_name.lower()) for f in prepared.facts} | {
            (f.source_urn, f.target_urn) for f in prepared.facts
        }
        query = prepared.query

        def exists(downstream: str, upstream: str) -> bool:
            if (downstream.lower(), upstream.lower()) in known:
                return True
            return self.edge_exists(query.tenant_id, downstream, upstream, query.project_id)

        return exists

    def _observe(
        self, prepared: _Prepared, body: dict[str, Any], timings: dict[str, float]
    ) -> None:
        intent = str(prepared.query.intent)
        meta = body["metadata"]
        self.metrics.requests.labels(intent, meta["action"], "none").inc()
        for stage, ms in timings.items():
            self.metrics.stage.labels(intent, stage).observe(ms / 1000)
        log.info(
            "chat %s query=%r strategy=%s sources=%s model=%s action=%s confidence=%s "
            "latency_ms=%s",
            intent,
            prepared.query.query,
            prepared.strategy,
            [s.urn for s in prepared.sources],
            body["model"],
            meta["action"],
            meta["confidence"]["overall"],
            timings,
        )
        log.debug("chat %s prompt=%r", intent, prepared.context)
        log.debug("chat %s response=%r", intent, body["answer"])

    # --- caching -----------------------------------------------------------------------

    def _cache_key(self, query: ChatQuery) -> Any:
        if self.answer_cache is None or query.chat_history or query.topic:
            return None
        from queries.answer_cache import AnswerKey

        return AnswerKey(
            intent=str(query.intent),
            question=query.query,
            project_id=query.project_id,
            tenant_id=query.tenant_id,
            user_tags=tuple(sorted(query.user_tags)),
            pipeline=query.pipeline or self.config.default_pipeline,
            chain_version=f"{self.chain_version()}|{query.model or ''}|{query.top_k or ''}",
        )

    async def _cached(self, query: ChatQuery) -> ChatAnswer | None:
        key = self._cache_key(query)
        if key is None:
            return None
        vector = None
        if profile(query.intent).uses_vectors:
            vector = await self._question_vector(query.query)
        try:
            hit = await self.answer_cache.lookup(key, vector)
        except Exception as exc:  # a cache must never fail a question
            log.warning("answer cache lookup failed: %s", exc)
            return None
        if hit is None:
            return None
        body = json.loads(json.dumps(hit.response))
        body["metadata"]["cache"] = hit.kind
        body["metadata"]["cache_score"] = round(float(hit.score), 4)
        self.metrics.requests.labels(str(query.intent), body["metadata"]["action"], hit.kind).inc()
        return ChatAnswer(body, {})

    async def _store(self, query: ChatQuery, prepared: _Prepared, body: dict[str, Any]) -> None:
        key = self._cache_key(query)
        if key is None or body["metadata"].get("action") != "CITE":
            return
        vector = prepared.retrieval.question_vector
        if vector is None and profile(query.intent).uses_vectors:
            vector = await self._question_vector(query.query)
        # the entities the question resolved to count too: new evidence about them drops it
        urns = [e["id"] for e in body["evidence"]] + prepared.retrieval.entity_urns
        try:
            await self.answer_cache.store(key, vector, body, urns)
        except Exception as exc:
            log.warning("answer cache store failed: %s", exc)

    async def _question_vector(self, text: str) -> list[float] | None:
        vectors = self.pipelines.get("vector")
        embed = getattr(getattr(vectors, "vectors", None), "embed", None)
        if embed is None:
            return None
        return list(await asyncio.to_thread(embed, text))


# --- helpers -------------------------------------------------------------------------------


class AnswerFieldExtractor:
    """Pulls the `answer` string out of a JSON object as it streams in, so SSE token events
    carry readable text rather than JSON syntax."""

    _KEY = '"answer"'

    def __init__(self) -> None:
        self.buffer = ""
        self.started = False
        self.done = False
        self._pos = 0
        self._escape = ""

    def feed(self, delta: str) -> str:
        if self.done:
            return ""
        self.buffer += delta
        if not self.started:
            at = self.buffer.find(self._KEY)
            if at < 0:
                return ""
            rest = self.buffer[at + len(self._KEY) :]
            stripped = rest.lstrip()
            if not stripped.startswith(":"):
                return ""
            after = stripped[1:].lstrip()
            if not after.startswith('"'):
                return ""
            self.started = True
            self._pos = len(self.buffer) - len(after) + 1
        return self._drain()

    def _drain(self) -> str:
        out: list[str] = []
        while self._pos < len(self.buffer):
            ch = self.buffer[self._pos]
            if self._escape:
                self._escape += ch
                if self._escape.startswith("\\u") and len(self._escape) < 6:
                    self._pos += 1
                    continue
                out.append(_unescape(self._escape))
                self._escape = ""
            elif ch == "\\":
                self._escape = ch
            elif ch == '"':
                self.done = True
                self._pos += 1
                break
            else:
                out.append(ch)
            self._pos += 1
        return "".join(out)


def _unescape(sequence: str) -> str:
    try:
        return str(json.loads(f'"{sequence}"'))
    except ValueError:
        return sequence[1:]


@dataclass
class _StreamResult:
    text: str
    model_used: str
    provider: str
    priority: int
    fallback_count: int
    counted: bool = False

    @classmethod
    def of(cls, opened: Any, text: str) -> _StreamResult:
        return cls(text, opened.model_used, opened.provider, opened.priority, opened.fallback_count)


def _unreadable(exc: AllModelsFailed) -> _StreamResult:
    """Re-raise unless every model failed only by answering unreadable output."""
    if not exc.attempts or any(a.reason != "malformed" for a in exc.attempts):
        raise exc
    last = exc.attempts[-1]
    return _StreamResult("", last.model, last.provider, last.priority, len(exc.attempts) - 1, True)


def _client_safe(result: Any) -> dict[str, Any]:
    """Which model answered, never why an earlier one failed (LLM-22.2: server-side only)."""
    return {
        "model_used": result.model_used,
        "provider": result.provider,
        "priority": result.priority,
        "fallback_count": result.fallback_count,
    }


def _evidence_item(source: ContextSource) -> EvidenceItem:
    return EvidenceItem(type=source.kind, id=source.urn, text=source.text)


def _evidence(
    data: dict[str, Any], sources: Sequence[ContextSource], cited: Any
) -> list[dict[str, str]]:
    """The model's evidence, kept only where it names retrieved context (as URNs), then any
    citation from the answer text it did not list."""
    by_id: dict[str, ContextSource] = {}
    for source in sources:
        by_id[source.urn] = source
        by_id[source.source_id] = source
    items: list[dict[str, str]] = []
    seen: set[str] = set()
    for raw in data.get("evidence", []):
        found = by_id.get(str(raw.get("id", "")))
        if found is None or found.urn in seen:
            continue
        seen.add(found.urn)
        items.append(
            {"type": found.kind, "id": found.urn, "note": str(raw.get("note") or "")[:500]}
        )
    for citation in cited.citations:
        if citation.urn not in seen and citation.urn in by_id:
            seen.add(citation.urn)
            items.append({"type": by_id[citation.urn].kind, "id": citation.urn, "note": ""})
    return items


def _parse(text: str) -> dict[str, Any] | None:
    parsed = parse_answer(text)
    return None if parsed is None else parsed.to_dict()


def _plain_question(question: str, history: str) -> str:
    if history:
        return f"## Conversation so far\n{history}\n\n## User Query\n{question}"
    return question


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))
