"""Ranked chunks for a query, straight from the vectors read model (no LLM)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from domain.ports import Embedder, RerankDocument, Reranker, VectorHit, VectorIndex

SNIPPET_CHARS = 300
RERANK_POOL = 4  # with rerank, the cross-encoder reorders top_k * RERANK_POOL candidates
RERANK_MAX_CANDIDATES = 100

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SearchHit:
    urn: str
    file_urn: str
    path: str
    project_id: str
    line_start: int
    line_end: int
    chunk_type: str
    score: float
    snippet: str
    rerank_score: float | None = None  # the cross-encoder's, when the search asked to rerank

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class SearchService:
    """Embeds the query and returns the closest chunks the caller's tenant may see."""

    def __init__(
        self, embedder: Embedder, index: VectorIndex, reranker: Reranker | None = None
    ) -> None:
        self.embedder = embedder
        self.index = index
        self.reranker = reranker

    @property
    def can_rerank(self) -> bool:
        return self.reranker is not None

    def search(
        self,
        query: str,
        *,
        project_id: str | None = None,
        tenant_id: str = "default",
        top_k: int = 10,
        path: str | None = None,
        chunk_type: str | None = None,
        user_tags: Sequence[str] = (),
        rerank: bool = False,
    ) -> list[SearchHit]:
        """`path` and `chunk_type` narrow the search to one file or one kind of chunk; a tagged
        chunk is found only by a caller holding one of its tags. `rerank` reorders a larger
        candidate pool with the cross-encoder (vector order, logged, when none is loaded)."""
        vector = self.embedder.embed([query])[0]
        filters = {"tenant_id": tenant_id}
        optional = {"project_id": project_id, "path": path, "chunk_type": chunk_type}
        filters.update({k: v for k, v in optional.items() if v})
        reranking = rerank and self.reranker is not None
        if rerank and not reranking:
            log.warning("search asked to rerank but no cross-encoder is loaded: vector order")
        limit = min(max(top_k * RERANK_POOL, top_k), RERANK_MAX_CANDIDATES) if reranking else top_k
        hits = self.index.search(vector, limit, filters, access_tags=tuple(user_tags))
        found = self._hits(hits)
        return self._reranked(query, hits, found, top_k) if reranking else found

    def _reranked(
        self, query: str, hits: list[VectorHit], found: list[SearchHit], top_k: int
    ) -> list[SearchHit]:
        assert self.reranker is not None
        candidates = [
            RerankDocument(id=str(i), text=str(h.payload.get("text", "")))
            for i, h in enumerate(hits)
        ]
        ranked = self.reranker.rerank(query, candidates, top_k)
        return [
            replace(found[r.original_rank - 1], rerank_score=round(r.score, 4)) for r in ranked
        ]

    def _hits(self, hits: list[VectorHit]) -> list[SearchHit]:
        return [
            SearchHit(
                urn=h.payload["urn"],
                file_urn=h.payload["file_urn"],
                path=h.payload["path"],
                project_id=h.payload["project_id"],
                line_start=int(h.payload["line_start"]),
                line_end=int(h.payload["line_end"]),
                chunk_type=h.payload["chunk_type"],
                score=round(h.score, 4),
                snippet=str(h.payload.get("text", ""))[:SNIPPET_CHARS],
            )
            for h in hits
        ]
