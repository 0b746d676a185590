"""The caches: their figures (`GET /api/v1/rag/status`) and their invalidation."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from api.deps import ContainerDep
from bus.cache_subjects import CMD_CACHE_INVALIDATE
from commands.cache import InvalidateCache
from domain.cache import parse_scope
from domain.errors import ServiceUnavailable

router = APIRouter(tags=["caches"])


class InvalidateIn(BaseModel):
    scope: str = Field(
        default="answers",
        description='"answers" (exact query:* and semantic query_cache), "embeddings" or "all"',
    )
    reason: str = Field(default="", description="Why (kept in the CachesInvalidated event)")
    actor: str = Field(default="api", description="Who asks (audit trail)")


@router.get("/api/v1/rag/status")
async def rag_status(container: ContainerDep) -> dict[str, Any]:
    """Cache figures: hit/miss rates per cache, embedder calls saved, entries and memory, the
    last invalidation, warming."""
    if container.caches is None:
        raise ServiceUnavailable("this process has no caches")
    status: dict[str, Any] = await asyncio.to_thread(container.caches.status)
    return status


@router.post("/api/v1/cache/invalidate")
async def invalidate(
    container: ContainerDep,
    body: InvalidateIn | None = None,
    wait: Annotated[
        bool, Query(description="Return once the caches are emptied (the read models caught up)")
    ] = False,
) -> dict[str, Any]:
    """Record `CachesInvalidated` (InvalidateCache on cmd.cache.invalidate); the cache
    projection deletes `query:*`, truncates `query_cache` and/or empties the embedding cache."""
    body = body or InvalidateIn()
    scope = parse_scope(body.scope)  # a bad scope is a 400 before anything is sent
    command = InvalidateCache(scope=scope.value, reason=body.reason, actor=body.actor)
    result = await container.command_bus.send(CMD_CACHE_INVALIDATE, command)
    waited = False
    if wait and result.position:
        await container.wait_for(result.position)
        waited = True
    return {
        "status": "invalidated" if waited else "accepted",
        "scope": scope.value,
        "position": result.position,
        "waited": waited,
    }
