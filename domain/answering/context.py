"""Evidence put in front of the model, serialized with deterministic ids.

Every vector chunk gets a SourceId `{document_id}:{chunk_index}` (rag-service.md, "Citation
Mapping") next to its URN, and every graph edge is written `[src] -[REL]-> [tgt]` with its path,
confidence and provenance (llm-service.md, "Context serialization format", LLM-28.2).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

SourceKind = Literal["chunk", "graph"]

VECTOR_HEADER = "## Vector Evidence"
GRAPH_HEADER = "## Graph Evidence"
GRAPH_HEADER_AUTHORITATIVE = (
    "## Graph Evidence (authoritative: lineage claims must rest on these edges)"
)
HISTORY_HEADER = "## Conversation History"
QUERY_HEADER = "## User Query"
NO_EVIDENCE = "(none)"


def document_id_for(file_urn: str) -> str:
    """A short deterministic document id for a file URN, matching `[a-zA-Z0-9-]+`."""
    return "doc-" + hashlib.sha1(file_urn.encode("utf-8")).hexdigest()[:12]


def source_id_for(document_id: str, chunk_index: int) -> str:
    """The SourceId the model cites: `{document_id}:{chunk_index}`."""
    return f"{document_id}:{chunk_index}"


@dataclass(frozen=True, slots=True)
class ContextSource:
    """One piece of retrieved evidence: a vector chunk, or a graph node with its description.

    `document_name` is the file path; `score` the retrieval similarity (0..1); `tags` the
    access tags of the chunk (they choose the owner to route to when confidence is low).
    """

    source_id: str
    urn: str
    kind: SourceKind
    document_id: str
    document_name: str
    chunk_index: int
    text: str
    score: float
    chunk_type: str | None
    line_start: int | None
    line_end: int | None
    tags: tuple[str, ...]
    section: str | None = None
    page_number: int | None = None

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], score: float) -> ContextSource:
        """Build from a vectors read-model payload (see projections/vectors.py)."""
        file_urn = str(payload.get("file_urn") or payload.get("urn") or "")
        index = int(payload.get("chunk_index", 0))
        document_id = document_id_for(file_urn)
        line_start, line_end = payload.get("line_start"), payload.get("line_end")
        return cls(
            source_id=source_id_for(document_id, index),
            urn=str(payload.get("urn", "")),
            kind="chunk",
            document_id=document_id,
            document_name=str(payload.get("path") or payload.get("file_path") or file_urn),
            chunk_index=index,
            text=str(payload.get("text", "")),
            score=float(score),
            chunk_type=_str_or_none(payload.get("chunk_type")),
            line_start=int(line_start) if line_start is not None else None,
            line_end=int(line_end) if line_end is not None else None,
            tags=tuple(str(t) for t in payload.get("tags") or ()),
            section=_str_or_none(payload.get("name")),
        )

    @property
    def location(self) -> str:
        """`path:start-end` (or `path:line`, or the path alone when lines are unknown)."""
        if self.line_start is None:
            return self.document_name
        if self.line_end is None or self.line_end == self.line_start:
            return f"{self.document_name}:{self.line_start}"
        return f"{self.document_name}:{self.line_start}-{self.line_end}"


def _str_or_none(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


@dataclass(frozen=True, slots=True)
class GraphFact:
    """One lineage edge as evidence: `source_urn -[rel]-> target_urn` (graph direction: the
    source reads from / derives from / writes to the target, see domain/graph.py)."""

    source_urn: str
    source_name: str
    source_kind: str
    rel: str
    target_urn: str
    target_name: str
    target_kind: str
    confidence: float
    provenance: str  # "deterministic" (parser edges) or "llm"
    file_path: str | None = None
    line_start: int | None = None
    line_end: int | None = None

    @property
    def evidence_ids(self) -> tuple[str, str]:
        return (self.source_urn, self.target_urn)

    @property
    def location(self) -> str | None:
        if not self.file_path:
            return None
        if self.line_start is None:
            return self.file_path
        if self.line_end is None or self.line_end == self.line_start:
            return f"{self.file_path}:{self.line_start}"
        return f"{self.file_path}:{self.line_start}-{self.line_end}"

    def edge_text(self) -> str:
        return f"[{self.source_urn}] -[{self.rel}]-> [{self.target_urn}]"

    def line(self) -> str:
        """The spec's serialization: edge, Path, Confidence, Source (and File when known)."""
        lines = [
            self.edge_text(),
            f"Path: {self.source_name} ({self.source_kind}) -> {self.rel} -> "
            f"{self.target_name} ({self.target_kind})",
            f"Confidence: {_confidence(self.confidence)}",
            f"Source: {self.provenance}",
        ]
        if self.location:
            lines.append(f"File: {self.location}")
        return "\n".join(lines)


def provenance_label(edge_provenance: str) -> str:
    """Map a LineageEdge provenance (`parser` | `llm`) to the context's `Source:` label."""
    return "llm" if edge_provenance == "llm" else "deterministic"


def _confidence(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:.1f}"


def render_chunk(source: ContextSource) -> str:
    """One evidence block: SourceId, URN, File, (Lines), Type, Content."""
    lines = [f"[SourceId: {source.source_id}]", f"[{source.urn}]", f"File: {source.document_name}"]
    if source.line_start is not None:
        end = source.line_end if source.line_end is not None else source.line_start
        lines.append(f"Lines: {source.line_start}-{end}")
    lines.append(f"Type: {source.chunk_type or source.kind}")
    lines.append(f"Content: {source.text}")
    return "\n".join(lines)


def render_context(
    chunks: Sequence[ContextSource],
    facts: Sequence[GraphFact],
    query: str,
    *,
    graph_authoritative: bool = False,
    history: str = "",
) -> str:
    """The structured context string of LLM-28.2.

    Chunks of kind "graph" (node descriptions) are listed under Graph Evidence after the edges.
    An empty section says "(none)" so the model knows the evidence is missing.
    """
    vector = [c for c in chunks if c.kind == "chunk"]
    nodes = [c for c in chunks if c.kind == "graph"]
    graph_blocks = [f.line() for f in facts] + [render_chunk(n) for n in nodes]
    parts = [
        VECTOR_HEADER + "\n" + ("\n\n".join(render_chunk(c) for c in vector) or NO_EVIDENCE),
        (GRAPH_HEADER_AUTHORITATIVE if graph_authoritative else GRAPH_HEADER)
        + "\n"
        + ("\n\n".join(graph_blocks) or NO_EVIDENCE),
    ]
    if history.strip():
        parts.append(HISTORY_HEADER + "\n" + history.strip())
    parts.append(QUERY_HEADER + "\n" + query)
    return "\n\n".join(parts)


def context_summary(chunks: Sequence[ContextSource], facts: Sequence[GraphFact]) -> str:
    """A short digest of the evidence for the confidence prompt (paths and edges, no code)."""
    lines = [f"- {c.location} ({c.chunk_type or c.kind}, score {c.score:.2f})" for c in chunks]
    lines += [f"- {f.source_name} -[{f.rel}]-> {f.target_name}" for f in facts]
    return "\n".join(lines) or NO_EVIDENCE
