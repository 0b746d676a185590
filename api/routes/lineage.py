"""Lineage queries over the graph read model."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from api.deps import ContainerDep

router = APIRouter(prefix="/api/v1/lineage", tags=["lineage"])

Hops = Annotated[int, Query(ge=1, le=5, description="How many steps to walk (1-5)")]
IncludeLlm = Annotated[
    str,
    Query(
        description="LLM-proposed edges to follow besides the parser's: none, accepted "
        "(default) or proposed (every open proposal; `true` means the same)"
    ),
]
Names = Annotated[list[str], Query(description="Names to look up (case-insensitive)")]


@router.get("/entities")
async def entities(
    container: ContainerDep,
    names: Names,
    project_id: str | None = None,
    tenant_id: str = "default",
) -> dict[str, Any]:
    """Find tables, models, columns and functions by name, many at once."""
    found = await asyncio.to_thread(container.lineage.lookup, tenant_id, project_id, names)
    return {"entities": found}


@router.get("/{ref:path}/upstream")
async def upstream(
    ref: str,
    container: ContainerDep,
    hops: Hops = 3,
    project_id: str | None = None,
    tenant_id: str = "default",
    include_llm: IncludeLlm = "accepted",
) -> dict[str, Any]:
    """What feeds an entity (URN or name): nodes, edges with evidence, paths."""
    return await _walk(container, ref, "upstream", hops, project_id, tenant_id, include_llm)


@router.get("/{ref:path}/downstream")
async def downstream(
    ref: str,
    container: ContainerDep,
    hops: Hops = 3,
    project_id: str | None = None,
    tenant_id: str = "default",
    include_llm: IncludeLlm = "accepted",
) -> dict[str, Any]:
    """What an entity (URN or name) feeds: what breaks if it changes."""
    return await _walk(container, ref, "downstream", hops, project_id, tenant_id, include_llm)


async def _walk(
    container: Any,
    ref: str,
    direction: Literal["upstream", "downstream"],
    hops: int,
    project_id: str | None,
    tenant_id: str,
    include_llm: str,
) -> dict[str, Any]:
    answer = await asyncio.to_thread(
        container.lineage.walk, tenant_id, project_id, ref, direction, hops, include_llm
    )
    result: dict[str, Any] = answer.to_dict()
    return result
