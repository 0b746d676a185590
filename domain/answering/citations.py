"""Deterministic citations (rag-service.md, "Citation Mapping"): SourceIds found in the answer
and evidence ids the model returned are mapped to the evidence that was actually retrieved.

An id that was not in the context is dropped and reported, never turned into a citation.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from domain.answering.context import ContextSource

CITATION_PATTERN = r"\[SourceId:\s*([a-zA-Z0-9-]+:\d+)\]"
_CITATION_RE = re.compile(CITATION_PATTERN)
_BARE_SOURCE_ID = re.compile(r"^[a-zA-Z0-9-]+:\d+$")
_WRAPPED = re.compile(r"^\[?\s*(?:SourceId:\s*)?(.*?)\s*\]?$", re.IGNORECASE)

SNIPPET_CHARS = 200
NOT_AVAILABLE = "N/A"


def snippet_of(text: str, limit: int = SNIPPET_CHARS) -> str:
    """First `limit` characters of the chunk text, with "..." when it was cut."""
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass(frozen=True, slots=True)
class Citation:
    """A source the answer relies on (rag-service.md `Citation`, plus its URN)."""

    source_id: str
    document_id: str
    document_name: str
    chunk_index: int
    page_number: int | None
    section: str | None
    relevance_score: float
    snippet: str
    snippet_full: str
    urn: str

    @classmethod
    def of(cls, source: ContextSource) -> Citation:
        return cls(
            source_id=source.source_id,
            document_id=source.document_id,
            document_name=source.document_name,
            chunk_index=source.chunk_index,
            page_number=source.page_number,
            section=source.section,
            relevance_score=source.score,
            snippet=snippet_of(source.text),
            snippet_full=source.text,
            urn=source.urn,
        )

    @property
    def page_display(self) -> str:
        return NOT_AVAILABLE if self.page_number is None else str(self.page_number)

    @property
    def section_display(self) -> str:
        return NOT_AVAILABLE if self.section is None else self.section

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class CitationResult:
    """Citations in order of first mention; `unknown` ids were not in the context (dropped)."""

    citations: list[Citation] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    graph_ids: list[str] = field(default_factory=list)  # known graph URNs the model cited

    @property
    def source_ids(self) -> list[str]:
        return [c.source_id for c in self.citations]

    @property
    def urns(self) -> list[str]:
        return [c.urn for c in self.citations]


def source_ids_in(text: str) -> list[str]:
    """Every `[SourceId: doc:idx]` in the text, in order (duplicates kept)."""
    return _CITATION_RE.findall(text)


def normalize_id(raw: str) -> str:
    """`[SourceId: doc-1:2]`, `[urn:li:...]` or ` doc-1:2 ` -> the bare id."""
    match = _WRAPPED.match(raw.strip())
    return match.group(1).strip() if match else raw.strip()


def map_citations(
    answer_text: str,
    evidence_ids: Sequence[str],
    sources: Sequence[ContextSource],
    *,
    graph_ids: Collection[str] = (),
) -> CitationResult:
    """Map the answer's SourceIds and the model's evidence ids to the retrieved sources.

    An evidence id may be a SourceId, a chunk URN, or a file URN (resolved to that file's
    best-scored chunk). `graph_ids` are the node URNs of the graph evidence: they are valid
    evidence but not chunk citations, so they are neither cited nor reported as unknown.
    """
    by_source_id = {s.source_id: s for s in sources}
    by_urn: dict[str, ContextSource] = {}
    for s in sorted(sources, key=lambda s: -s.score):
        by_urn.setdefault(s.urn, s)
    by_file: dict[str, ContextSource] = {}
    for s in sorted(sources, key=lambda s: -s.score):
        file_urn = _file_urn_of(s.urn)
        if file_urn:
            by_file.setdefault(file_urn, s)
    known_graph = set(graph_ids)

    result = CitationResult()
    seen: set[str] = set()
    mentioned = [*source_ids_in(answer_text), *(normalize_id(e) for e in evidence_ids)]
    for raw in mentioned:
        if not raw or raw in seen:
            continue
        seen.add(raw)
        source = by_source_id.get(raw) or by_urn.get(raw) or by_file.get(raw)
        if source is not None:
            if source.source_id not in {c.source_id for c in result.citations}:
                result.citations.append(Citation.of(source))
        elif raw in known_graph:
            result.graph_ids.append(raw)
        else:
            result.unknown.append(raw)
            result.warnings.append(f"Dropped citation {raw!r}: it is not in the retrieved context.")
    return result


def _file_urn_of(chunk_urn: str) -> str | None:
    """`urn:li:chunk:p:path#3` -> `urn:li:file:p:path` (None for other URNs)."""
    prefix = "urn:li:chunk:"
    if not chunk_urn.startswith(prefix) or "#" not in chunk_urn:
        return None
    return "urn:li:file:" + chunk_urn[len(prefix) :].rsplit("#", 1)[0]


def is_source_id(text: str) -> bool:
    return _BARE_SOURCE_ID.match(text) is not None
