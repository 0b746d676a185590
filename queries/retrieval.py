"""Retrieval for answering: vector chunks and lineage-graph facts, as named pipelines.

Every retrieval is scoped to the caller: the tenant, the project when given, and the caller's
access tags (a tagged chunk is found only by a caller holding one of its tags; graph facts are
kept per tenant by the graph read model). Pipelines are selectable by name (`RAG_PIPELINE`, or
per request) so two of them can be compared on the same questions (`upstream eval`).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from domain.answering.context import ContextSource, GraphFact, document_id_for
from domain.answering.entities import entity_candidates
from domain.answering.quality import select_chunks
from domain.graph import DATASET_KINDS, LineageEdge, LineageNode, NodeKind, Rel
from domain.graph_port import GraphStore
from domain.ingestion import ACCESS_TAGS
from domain.ports import Embedder, RerankDocument, Reranker, VectorHit, VectorIndex

log = logging.getLogger("upstream.retrieval")

Direction = Literal["upstream", "downstream", "both"]

OVERFETCH = 3  # candidates fetched per chunk kept, before the quality filters
MAX_ENTITIES = 5  # graph start points taken from one question
MAX_FACTS = 200  # edges serialised into one context


@dataclass(frozen=True, slots=True)
class RetrievalQuery:
    """What to retrieve: `text` is embedded; `question` (default: `text`) names the entities."""

    text: str
    intent: str = "deep"
    project_id: str | None = None
    tenant_id: str = "default"
    user_tags: tuple[str, ...] = ()
    top_k: int = 10
    hops: int = 2
    question: str | None = None
    min_score: float | None = None
    rerank: bool = False
    include_entities: bool = True  # the named entities' own nodes as evidence, first

    @property
    def entity_text(self) -> str:
        return self.question or self.text


@dataclass
class Retrieval:
    """Evidence for one question: graph sources first, then chunks, in prompt order."""

    sources: list[ContextSource] = field(default_factory=list)
    facts: list[GraphFact] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    question_vector: list[float] | None = None
    entity_urns: list[str] = field(default_factory=list)
    candidates: int = 0

    @property
    def chunks(self) -> list[ContextSource]:
        return [s for s in self.sources if s.kind == "chunk"]

    @property
    def graph_sources(self) -> list[ContextSource]:
        return [s for s in self.sources if s.kind == "graph"]


class RetrievalPipeline(Protocol):
    """A named retrieval strategy (the successor of the spec's USE_LLAMAINDEX flag)."""

    name: str
    description: str

    async def retrieve(self, query: RetrievalQuery) -> Retrieval: ...


# --- direction of a lineage question ----------------------------------------------------

_UPSTREAM = re.compile(
    r"\bupstream\b|\bwhat (?:tables? |models? |sources? )?(?:feeds?|populates?|loads?)\b"
    r"|\bsources? of\b|\bcomes? from\b|\bbuilt from\b|\bderived from\b|\bfed by\b"
    r"|\bdoes \S+ (?:depend|read|come)\b|\binputs? (?:of|to|for)\b",
    re.IGNORECASE,
)
_DOWNSTREAM = re.compile(
    r"\bdownstream\b|\bbreaks?\b|\bimpact|\baffect|\bconsum|\bwhat depends on\b"
    r"|\bwho (?:uses|reads)\b|\bwhat (?:uses|reads from)\b|\bdoes \S+ feed\b|\bused by\b",
    re.IGNORECASE,
)


def lineage_direction(question: str) -> Direction:
    """Which way a question walks the graph: "what feeds X" is upstream, "what breaks if X
    changes" downstream; anything else, or both kinds of cue, walks both ways."""
    up, down = bool(_UPSTREAM.search(question)), bool(_DOWNSTREAM.search(question))
    if up and not down:
        return "upstream"
    if down and not up:
        return "downstream"
    return "both"


# --- vectors ------------------------------------------------------------------------------


class VectorRetriever:
    """Embeds the query and returns quality-filtered chunks the caller may see."""

    def __init__(
        self,
        embedder: Embedder,
        index: VectorIndex,
        *,
        min_score: float = 0.3,
        max_per_doc: int = 3,
        overlap_threshold: float = 0.9,
        reranker: Reranker | None = None,
    ) -> None:
        self.embedder = embedder
        self.index = index
        self.reranker = reranker
        self.min_score = min_score
        self.max_per_doc = max_per_doc
        self.overlap_threshold = overlap_threshold

    def embed(self, text: str) -> list[float]:
        return list(self.embedder.embed([text])[0])

    def candidates(
        self, vector: Sequence[float], query: RetrievalQuery, top_k: int
    ) -> list[ContextSource]:
        """The index search itself: `top_k` x OVERFETCH chunks the caller may see."""
        filters = {"tenant_id": query.tenant_id}
        if query.project_id:
            filters["project_id"] = query.project_id
        hits = self.index.search(
            vector, top_k * OVERFETCH, filters, access_tags=tuple(query.user_tags)
        )
        return [chunk_source(h) for h in hits]

    def select(
        self, candidates: Sequence[ContextSource], query: RetrievalQuery, top_k: int
    ) -> list[ContextSource]:
        """Minimum similarity, near-duplicates, at most `max_per_doc` per file, top-k (in the
        cross-encoder's order when the query asks for reranking and one is loaded)."""
        reranking = query.rerank and self.reranker is not None
        kept = select_chunks(
            candidates,
            len(candidates) if reranking else top_k,
            min_score=self.min_score if query.min_score is None else query.min_score,
            max_per_doc=self.max_per_doc,
            overlap_threshold=self.overlap_threshold,
        )
        chunks = list(kept.chunks)
        if reranking:
            chunks = self._reranked(query.entity_text, chunks)
        return chunks[:top_k]

    def _reranked(self, question: str, chunks: list[ContextSource]) -> list[ContextSource]:
        """The chunks in the cross-encoder's order; the vector order when it fails."""
        assert self.reranker is not None
        by_urn = {c.urn: c for c in chunks}
        try:
            ranked = self.reranker.rerank(question, [RerankDocument(c.urn, c.text) for c in chunks])
        except Exception as exc:
            log.warning("reranking failed, keeping the vector order: %s", exc)
            return chunks
        return [by_urn[r.id] for r in ranked if r.id in by_urn]

    def search(
        self, vector: Sequence[float], query: RetrievalQuery, top_k: int
    ) -> tuple[list[ContextSource], int]:
        found = self.candidates(vector, query, top_k)
        return self.select(found, query, top_k), len(found)


def chunk_source(hit: VectorHit) -> ContextSource:
    return ContextSource.from_payload(hit.payload, round(float(hit.score), 4))


# --- graph ---------------------------------------------------------------------------------


@dataclass
class GraphEvidence:
    entities: list[LineageNode] = field(default_factory=list)
    reached: list[LineageNode] = field(default_factory=list)
    facts: list[GraphFact] = field(default_factory=list)


class GraphRetriever:
    """Finds the entities a question names (one batched, case-insensitive lookup) and walks
    the lineage graph from them, keeping only what the caller may see: an edge found in a
    tagged file counts only for a caller holding one of the file's tags."""

    def __init__(self, graph: GraphStore, *, include_llm: bool = False) -> None:
        self.graph = graph
        self.include_llm = include_llm

    def retrieve(
        self,
        question: str,
        tenant_id: str,
        project_id: str | None,
        hops: int,
        user_tags: Sequence[str] = (),
    ) -> GraphEvidence:
        names = entity_candidates(question)
        if not names or hops <= 0:
            return GraphEvidence()
        found = self.graph.find_nodes(tenant_id, project_id, names)
        entities = _pick_entities(names, found)
        visible = _Access(user_tags)
        known: dict[str, LineageNode] = {n.urn: n for n in entities}
        edges: dict[str, LineageEdge] = {}
        for entity in entities:
            for way in _ways(lineage_direction(question)):
                rels = (Rel.DERIVES,) if entity.kind == NodeKind.COLUMN else (Rel.READS_FROM,)
                sub = self.graph.traverse(tenant_id, entity.urn, way, hops, rels, self.include_llm)
                known.update((n.urn, n) for n in sub.nodes if n.urn not in known)
                edges.update((e.edge_id, e) for e in sub.edges if visible(e.properties))
        kept = _reachable_edges(entities, list(edges.values()), hops)[:MAX_FACTS]
        entity_urns = {e.urn for e in entities}
        reached = dict.fromkeys(u for e in kept for u in (e.source, e.target))
        return GraphEvidence(
            entities=[_visible_node(e, visible) for e in entities],
            reached=[
                _visible_node(known[u], visible)
                for u in reached
                if u in known and u not in entity_urns
            ],
            facts=[_fact(e, known) for e in kept],
        )


class _Access:
    """Whether the caller may see what a tagged file contributed (see `with_access_tags`)."""

    def __init__(self, user_tags: Sequence[str]) -> None:
        self.user_tags = set(user_tags)

    def __call__(self, properties: dict[str, Any]) -> bool:
        tags = properties.get(ACCESS_TAGS)
        return not tags or bool(self.user_tags & set(tags))


def _reachable_edges(
    entities: Sequence[LineageNode], edges: Sequence[LineageEdge], hops: int
) -> list[LineageEdge]:
    """The visible edges still connected to a start entity within `hops` steps (a path through
    a hidden edge does not count), in a stable order."""
    frontier = {e.urn for e in entities}
    reached = set(frontier)
    kept: dict[str, LineageEdge] = {}
    for _ in range(hops):
        step = [e for e in edges if e.source in frontier or e.target in frontier]
        kept.update((e.edge_id, e) for e in step)
        frontier = {u for e in step for u in (e.source, e.target)} - reached
        reached |= frontier
        if not frontier:
            break
    return sorted(kept.values(), key=lambda e: (e.source, e.rel, e.target, e.file_path))


def _visible_node(node: LineageNode, visible: _Access) -> LineageNode:
    """The node, without where it is defined when that file is tagged for others."""
    if visible(node.properties):
        return node
    return LineageNode(node.urn, node.kind, node.name, node.project_id, None, {})


def _ways(direction: Direction) -> tuple[Literal["upstream", "downstream"], ...]:
    if direction == "both":
        return ("upstream", "downstream")
    return (direction,)


def _pick_entities(names: Sequence[str], found: dict[str, list[LineageNode]]) -> list[LineageNode]:
    """For each name, the dataset it names exactly (else every dataset it matches, else any
    match), at most MAX_ENTITIES start points over the question."""
    picked: dict[str, LineageNode] = {}
    for name in names:
        nodes = found.get(name) or []
        datasets = [n for n in nodes if n.kind in DATASET_KINDS]
        exact = [n for n in datasets if n.name.lower() == name.lower()]
        exact = exact or [n for n in datasets if n.name.lower().endswith("." + name.lower())]
        for node in exact or datasets or nodes[:1]:
            picked.setdefault(node.urn, node)
    return list(picked.values())[:MAX_ENTITIES]


def _fact(edge: LineageEdge, known: dict[str, LineageNode]) -> GraphFact:
    source, target = known.get(edge.source), known.get(edge.target)
    return GraphFact(
        source_urn=edge.source,
        source_name=source.name if source else _tail(edge.source),
        source_kind=str(source.kind) if source else "entity",
        rel=str(edge.rel),
        target_urn=edge.target,
        target_name=target.name if target else _tail(edge.target),
        target_kind=str(target.kind) if target else "entity",
        confidence=edge.confidence,
        provenance="deterministic" if edge.provenance == "parser" else edge.provenance,
        file_path=edge.file_path,
        line_start=edge.line_start,
        line_end=edge.line_end,
    )


def _tail(urn: str) -> str:
    return urn.rsplit(":", 1)[-1]


def graph_sources(evidence: GraphEvidence, include_entities: bool = False) -> list[ContextSource]:
    """One evidence item per node: its URN, where it is defined, how it is linked. With
    `include_entities` the nodes the question named come first (their own definition is
    often the answer: "where is X computed", "what feeds X" starts at X's file)."""
    links: dict[str, list[str]] = {}
    found_in: dict[str, str] = {}  # for nodes without a defining file: where an edge says so
    for fact in evidence.facts:
        line = f"{fact.source_name} -[{fact.rel}]-> {fact.target_name}"
        links.setdefault(fact.source_urn, []).append(line)
        links.setdefault(fact.target_urn, []).append(line)
        if fact.file_path:
            found_in.setdefault(fact.source_urn, fact.file_path)
    for fact in evidence.facts:
        if fact.file_path:
            found_in.setdefault(fact.target_urn, fact.file_path)
    sources = []
    nodes = [*evidence.entities, *evidence.reached] if include_entities else evidence.reached
    for node in nodes:
        where = f" defined in {node.path}" if node.path else ""
        edges = "; ".join(links.get(node.urn, [])[:5])
        text = f"{node.name} ({node.kind}){where}. {edges}".strip()
        sources.append(
            ContextSource(
                source_id=f"{document_id_for(node.urn)}:0",
                urn=node.urn,
                kind="graph",
                document_id=document_id_for(node.urn),
                document_name=node.path or found_in.get(node.urn) or node.name,
                chunk_index=0,
                text=text,
                score=1.0,
                chunk_type=str(node.kind),
                line_start=None,
                line_end=None,
                tags=(),
                section=node.name,
            )
        )
    return sources


# --- pipelines -------------------------------------------------------------------------------


class VectorPipeline:
    """Vector search only: the top chunks by similarity, after the quality filters."""

    name = "vector"
    description = "vector search only (top-k chunks, quality-filtered)"

    def __init__(self, vectors: VectorRetriever) -> None:
        self.vectors = vectors

    async def retrieve(self, query: RetrievalQuery) -> Retrieval:
        result = Retrieval()
        if query.top_k <= 0:
            return result
        try:
            vector = await _timed(result.timings_ms, "embedding", self.vectors.embed, query.text)
            result.question_vector = vector
            found = await _timed(
                result.timings_ms, "retrieval", self.vectors.candidates, vector, query, query.top_k
            )
        except Exception as exc:
            log.warning("vector retrieval failed: %s", exc)
            result.warnings.append(f"Vector search failed ({type(exc).__name__}); no chunks.")
            return result
        result.candidates = len(found)
        result.sources = self.vectors.select(found, query, query.top_k)
        return result


class HybridPipeline:
    """Vector search and the lineage graph, run in parallel; graph evidence first."""

    name = "hybrid"
    description = "vector search + lineage graph traversal from the entities named"

    def __init__(self, vectors: VectorRetriever, graph: GraphRetriever) -> None:
        self.vectors = vectors
        self.graph = graph
        self._vector_only = VectorPipeline(vectors)

    async def retrieve(self, query: RetrievalQuery) -> Retrieval:
        vector_part, graph_part = await asyncio.gather(
            self._vector_only.retrieve(query),
            _timed_graph(self.graph, query),
            return_exceptions=True,
        )
        result = vector_part if isinstance(vector_part, Retrieval) else Retrieval()
        if isinstance(vector_part, BaseException):  # pragma: no cover - retrieve() catches
            result.warnings.append("Vector search failed; the answer uses graph evidence only.")
        if isinstance(graph_part, BaseException):
            log.warning("graph retrieval failed: %s", graph_part)
            result.warnings.append(
                f"Graph lookup failed ({type(graph_part).__name__}); "
                "the answer uses vector evidence only."
            )
            return result
        evidence, graph_ms = graph_part
        result.timings_ms["graph"] = graph_ms
        result.entities = [n.name for n in evidence.entities]
        result.entity_urns = [n.urn for n in evidence.entities]
        result.facts = evidence.facts
        # the named entities first, except when the question asks what they feed
        entities_first = query.include_entities and lineage_direction(query.entity_text) != (
            "downstream"
        )
        result.sources = graph_sources(evidence, entities_first) + result.sources
        return result


async def _timed_graph(graph: GraphRetriever, query: RetrievalQuery) -> tuple[GraphEvidence, float]:
    began = time.perf_counter()
    evidence = await asyncio.to_thread(
        graph.retrieve,
        query.entity_text,
        query.tenant_id,
        query.project_id,
        query.hops,
        query.user_tags,
    )
    return evidence, round((time.perf_counter() - began) * 1000, 3)


async def _timed(timings: dict[str, float], name: str, fn: Callable[..., Any], *args: Any) -> Any:
    began = time.perf_counter()
    try:
        return await asyncio.to_thread(fn, *args)
    finally:
        timings[name] = round(timings.get(name, 0.0) + (time.perf_counter() - began) * 1000, 3)


def make_pipelines(
    embedder: Embedder,
    index: VectorIndex,
    graph: GraphStore,
    *,
    min_score: float = 0.3,
    max_per_doc: int = 3,
    overlap_threshold: float = 0.9,
    reranker: Reranker | None = None,
) -> dict[str, RetrievalPipeline]:
    """The named pipelines over these read models."""
    vectors = VectorRetriever(
        embedder,
        index,
        min_score=min_score,
        max_per_doc=max_per_doc,
        overlap_threshold=overlap_threshold,
        reranker=reranker,
    )
    pipelines: list[RetrievalPipeline] = [
        VectorPipeline(vectors),
        HybridPipeline(vectors, GraphRetriever(graph)),
    ]
    return {p.name: p for p in pipelines}


def build_pipelines(container: Any) -> dict[str, RetrievalPipeline]:
    """The pipelines a container's chat answers with (the same objects: what `upstream eval`
    measures is what the API runs)."""
    return dict(container.chat.pipelines)


def edge_checker(graph: GraphStore, hops: int = 3) -> Callable[[str, str, str, str | None], bool]:
    """`exists(tenant, downstream, upstream, project)`: does the graph hold a path of at most
    `hops` READS_FROM/DERIVES steps from `downstream` to `upstream` (names or URNs)?"""

    def exists(tenant_id: str, downstream: str, upstream: str, project_id: str | None) -> bool:
        found = graph.find_nodes(tenant_id, project_id, [downstream, upstream])
        targets = {n.urn for n in found.get(upstream, [])}
        if not targets:
            return False
        for node in found.get(downstream, []):
            sub = graph.traverse(
                tenant_id, node.urn, "upstream", hops, (Rel.READS_FROM, Rel.DERIVES), False
            )
            if targets & {n.urn for n in sub.nodes}:
                return True
        return False

    return exists
