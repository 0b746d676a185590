"""Health and operations."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel

from api.deps import ContainerDep
from queries.health import DOWN, build_health

router = APIRouter(tags=["operations"])


@router.get("/health")
async def health(container: ContainerDep, response: Response) -> dict[str, Any]:
    """Each component as ok/degraded/down, projection lags in events, and the profile."""
    report = await asyncio.to_thread(build_health, container)
    if report["status"] == DOWN:
        response.status_code = 503
    return report


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request) -> PlainTextResponse:
    """Prometheus text format."""
    body = await asyncio.to_thread(request.app.state.metrics.render)
    return PlainTextResponse(body, media_type=CONTENT_TYPE_LATEST)


@router.get("/asyncapi")
async def asyncapi() -> Response:
    """The bus contract (subjects and payload schemas) as AsyncAPI 3.0 JSON."""
    from bus.asyncapi import asyncapi_json

    return Response(asyncapi_json(), media_type="application/json")


class ReplayRequest(BaseModel):
    projection: str | None = None


@router.post("/api/v1/replay")
async def replay(body: ReplayRequest, container: ContainerDep) -> dict[str, Any]:
    """Drop a read model (or all) and rebuild it from the event store."""
    applied = await container.replay(body.projection)
    return {"replayed": applied, "position": container.app.max_position()}
