"""Ranked chunks for a query, straight from the vectors read model (no LLM)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from domain.ports import Embedder, VectorIndex

SNIPPET_CHARS = 300


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

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class SearchService:
    """Embeds the query and returns the closest chunks the caller's tenant may see."""

    def __init__(self, embedder: Embedder, index: VectorIndex) -> None:
        self.embedder = embedder
        self.index = index

    def search(
        self,
        query: str,
        *,
        project_id: str | None = None,
        tenant_id: str = "default",
        top_k: int = 10,
        path: str | None = None,
        chunk_type: str | None = None,
    ) -> list[SearchHit]:
        """`path` and `chunk_type` narrow the search to one file or one kind of chunk."""
        vector = self.embedder.embed([query])[0]
        filters = {"tenant_id": tenant_id}
        optional = {"project_id": project_id, "path": path, "chunk_type": chunk_type}
        filters.update({k: v for k, v in optional.items() if v})
        hits = self.index.search(vector, top_k, filters)
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
