"""Retrieval quality controls (rag-service.md, "Retrieval Quality Controls").

Candidates are over-fetched (3x top_k) and arrive sorted by score. Pipeline: drop those under
the minimum similarity, drop near-duplicates of a better chunk (word-shingle Jaccard above the
overlap threshold), keep at most `max_per_doc` chunks of one document, return the top k.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from domain.answering.context import ContextSource

MIN_SIMILARITY = 0.3  # RAG_MIN_SIMILARITY_SCORE
MAX_CHUNKS_PER_DOC = 3  # RAG_MAX_CHUNKS_PER_DOC
TOTAL_CONTEXT_CHUNKS = 5  # RAG_TOTAL_CONTEXT_CHUNKS
OVERLAP_THRESHOLD = 0.9  # RAG_CHUNK_OVERLAP_THRESHOLD
OVERFETCH = 3

_TOKEN = re.compile(r"\w+")
SHINGLE = 3


def overfetch(top_k: int) -> int:
    """How many candidates to ask the vector index for."""
    return max(1, top_k) * OVERFETCH


def shingles(text: str, size: int = SHINGLE) -> frozenset[tuple[str, ...]]:
    """Lower-cased word n-grams of the text (the words themselves for texts shorter than n)."""
    words = _TOKEN.findall(text.lower())
    if len(words) < size:
        return frozenset((w,) for w in words)
    return frozenset(tuple(words[i : i + size]) for i in range(len(words) - size + 1))


def jaccard(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
    if not a and not b:
        return 1.0
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def text_similarity(a: str, b: str) -> float:
    """Word 3-shingle Jaccard similarity, 0..1 (1.0 for identical texts)."""
    return 1.0 if a == b else jaccard(shingles(a), shingles(b))


@dataclass(slots=True)
class QualityResult:
    """The chunks kept and how many each stage dropped (top-k cuts are not counted)."""

    chunks: list[ContextSource] = field(default_factory=list)
    dropped_low_score: int = 0
    dropped_duplicates: int = 0
    dropped_per_doc: int = 0


def select_chunks(
    candidates: Sequence[ContextSource],
    top_k: int,
    *,
    min_score: float = MIN_SIMILARITY,
    max_per_doc: int = MAX_CHUNKS_PER_DOC,
    overlap_threshold: float = OVERLAP_THRESHOLD,
) -> QualityResult:
    """Filter, deduplicate, limit per document, and cut to top_k, best score first."""
    ordered = sorted(candidates, key=lambda c: -c.score)
    result = QualityResult()
    kept_shingles: list[frozenset[tuple[str, ...]]] = []
    per_doc: dict[str, int] = {}
    for candidate in ordered:
        if candidate.score < min_score:
            result.dropped_low_score += 1
            continue
        grams = shingles(candidate.text)
        if any(jaccard(grams, seen) > overlap_threshold for seen in kept_shingles):
            result.dropped_duplicates += 1
            continue
        kept_shingles.append(grams)
        if per_doc.get(candidate.document_id, 0) >= max_per_doc:
            result.dropped_per_doc += 1
            continue
        per_doc[candidate.document_id] = per_doc.get(candidate.document_id, 0) + 1
        result.chunks.append(candidate)
    result.chunks = result.chunks[: max(0, top_k)]
    return result


PROJECT_CONTEXT_MIN_ITEMS = 5
PROJECT_CONTEXT_MAX_ITEMS = 10


def select_project_context(
    items: Sequence[tuple[str, float]],
    limit: int = PROJECT_CONTEXT_MAX_ITEMS,
    *,
    min_score: float = MIN_SIMILARITY,
) -> list[tuple[str, float]]:
    """The project-context items for a prompt (LLM-40.4): those relevant to the query (score,
    a semantic similarity computed by the caller, at least `min_score`), best first, at most
    `limit` clamped to 5..10."""
    limit = min(PROJECT_CONTEXT_MAX_ITEMS, max(PROJECT_CONTEXT_MIN_ITEMS, limit))
    relevant = [item for item in items if item[1] >= min_score]
    return sorted(relevant, key=lambda item: -item[1])[:limit]
