"""Search: ranked chunks for a query, without an LLM."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from api.deps import ContainerDep

router = APIRouter(prefix="/api/v1", tags=["search"])


class SearchRequest(BaseModel):
    query: str = Field(min_length=1, max_length=4000)
    project_id: str | None = None
    tenant_id: str = "default"
    user_tags: list[str] = Field(
        default_factory=list, description="The caller's access tags: tagged chunks need one"
    )
    top_k: int = Field(default=10, ge=1, le=100)
    path: str | None = Field(default=None, description="Only chunks of this file")
    chunk_type: str | None = Field(
        default=None, description="Only this kind of chunk: sql_view, python_function, ..."
    )
    rerank: bool = Field(
        default=False,
        description="Reorder the candidates with the cross-encoder (when the service has one)",
    )


class Hit(BaseModel):
    urn: str
    file_urn: str
    path: str
    project_id: str
    line_start: int
    line_end: int
    chunk_type: str
    score: float
    snippet: str
    rerank_score: float | None = None


class SearchResponse(BaseModel):
    query: str
    hits: list[Hit]
    filters: dict[str, str]
    took_ms: float
    reranked: bool = False


@router.post("/search", response_model=SearchResponse)
async def search(body: SearchRequest, container: ContainerDep, request: Request) -> SearchResponse:
    """Ranked chunks (URN, path, lines, score, snippet) for a query."""
    started = time.perf_counter()
    with request.app.state.metrics.search_seconds.time():
        hits = await asyncio.to_thread(
            container.search.search,
            body.query,
            project_id=body.project_id,
            tenant_id=body.tenant_id,
            top_k=body.top_k,
            path=body.path,
            chunk_type=body.chunk_type,
            user_tags=body.user_tags,
            rerank=body.rerank,
        )
    return SearchResponse(
        reranked=body.rerank and container.search.can_rerank,
        query=body.query,
        hits=[Hit.model_validate(h.to_dict()) for h in hits],
        filters={
            k: v
            for k, v in {
                "project_id": body.project_id,
                "path": body.path,
                "chunk_type": body.chunk_type,
            }.items()
            if v
        },
        took_ms=round((time.perf_counter() - started) * 1000, 2),
    )
