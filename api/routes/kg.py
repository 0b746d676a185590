"""Knowledge-graph enrichment: ask for LLM-proposed edges, review them, read their history."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query
from pydantic import BaseModel, Field

from api.deps import ContainerDep, Wait, send_command, wait_if_asked
from bus.kg_subjects import CMD_KG_ACCEPT_EDGE, CMD_KG_PROPOSE_EDGES, CMD_KG_REJECT_EDGE
from commands.kg import AcceptLineageEdge, ProposeKGEdges, RejectLineageEdge
from commands.models import CommandResult

router = APIRouter(prefix="/api/v1/kg", tags=["knowledge graph"])

Actor = Annotated[str, Header(alias="X-Actor", description="Who decides (audit trail)")]
Tenant = Annotated[str, Query(description="Tenant id")]


class ProposeRequest(BaseModel):
    project_id: str = Field(description="The project whose files are enriched")
    tenant_id: str = "default"
    scope: list[str] = Field(
        default_factory=list, description="File paths or folders; empty: every SQL/Python file"
    )
    reason: str = Field(default="", description="Why (kept in the run's events)")


class Decision(BaseModel):
    tenant_id: str = "default"
    reason: str = Field(default="", description="Why (kept in the edge's history)")


@router.post("/propose", status_code=202)
async def propose(
    body: ProposeRequest, container: ContainerDep, wait: Wait = False, actor: Actor = "api"
) -> dict[str, Any]:
    """Start an enrichment run over a project's files (503 without a kg_edge_creation model).

    The run is asynchronous: follow it at `GET /api/v1/kg/runs/{run_id}`."""
    chain = await asyncio.to_thread(container.kg.require_chain)
    command = ProposeKGEdges(
        tenant_id=body.tenant_id,
        project_id=body.project_id,
        scope=tuple(body.scope),
        actor=actor,
        reason=body.reason,
    )
    result = await send_command(container, CMD_KG_PROPOSE_EDGES, command)
    return {
        "run_id": result.aggregate_id,
        "status": "requested",
        "position": result.position,
        "models": [f"{r['provider']}:{r['model_id']}" for r in chain],
        "waited": await wait_if_asked(container, result, wait),
    }


@router.post("/edges/{edge_id}/accept")
async def accept(
    edge_id: str,
    container: ContainerDep,
    body: Annotated[Decision | None, Body()] = None,
    wait: Wait = False,
    actor: Actor = "api",
) -> dict[str, Any]:
    """Accept an LLM-proposed edge: lineage queries follow it by default from then on."""
    decision = body or Decision()
    command = AcceptLineageEdge(
        tenant_id=decision.tenant_id, edge_id=edge_id, actor=actor, reason=decision.reason
    )
    result = await send_command(container, CMD_KG_ACCEPT_EDGE, command)
    return await _decided(container, decision.tenant_id, edge_id, result, wait)


@router.post("/edges/{edge_id}/reject")
async def reject(
    edge_id: str,
    container: ContainerDep,
    body: Annotated[Decision | None, Body()] = None,
    wait: Wait = False,
    actor: Actor = "api",
) -> dict[str, Any]:
    """Reject an LLM-proposed edge: it leaves the graph and is not proposed again."""
    decision = body or Decision()
    command = RejectLineageEdge(
        tenant_id=decision.tenant_id, edge_id=edge_id, actor=actor, reason=decision.reason
    )
    result = await send_command(container, CMD_KG_REJECT_EDGE, command)
    return await _decided(container, decision.tenant_id, edge_id, result, wait)


@router.get("/edges")
async def edges(
    container: ContainerDep,
    project_id: str | None = None,
    status: Annotated[
        str | None, Query(description="proposed, accepted, rejected or retracted")
    ] = None,
    verification: Annotated[
        str | None, Query(description="verified, contradicted or unverified")
    ] = None,
    tenant_id: Tenant = "default",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """LLM-proposed edges with their model, confidence, reasoning, verification and status."""
    found = await asyncio.to_thread(
        container.kg.edges, tenant_id, project_id, status, verification, limit, offset
    )
    return {"edges": found, "count": len(found)}


@router.get("/edges/{edge_id}/history")
async def edge_history(
    edge_id: str, container: ContainerDep, tenant_id: Tenant = "default"
) -> dict[str, Any]:
    """Every event of an edge (parsed, proposed, verified, accepted, rejected, retracted)
    with its time and actor; any edge id of a lineage answer works."""
    history: dict[str, Any] = await asyncio.to_thread(container.kg.history, tenant_id, edge_id)
    return history


@router.get("/runs")
async def runs(
    container: ContainerDep,
    project_id: str | None = None,
    after_position: Annotated[int, Query(ge=0, description="Runs recorded after it")] = 0,
    tenant_id: Tenant = "default",
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> dict[str, Any]:
    """Enrichment runs, newest first: trigger, each file's outcome, the totals."""
    found = await asyncio.to_thread(container.kg.runs, tenant_id, project_id, after_position, limit)
    return {"runs": found, "count": len(found)}


@router.get("/runs/{run_id}")
async def run(
    run_id: str, container: ContainerDep, tenant_id: Tenant = "default"
) -> dict[str, Any]:
    """One enrichment run (status `requested` until the policy has done it)."""
    found: dict[str, Any] = await asyncio.to_thread(container.kg.run, tenant_id, run_id)
    return found


@router.get("/summary")
async def summary(
    container: ContainerDep,
    project_id: str,
    after_position: Annotated[int, Query(ge=0)] = 0,
    tenant_id: Tenant = "default",
) -> dict[str, Any]:
    """What enrichment did for a project since a position: runs, pending files, proposed and
    accepted counts, models used, confidence min/median/max (what `upstream ingest` prints)."""
    found: dict[str, Any] = await asyncio.to_thread(
        container.kg.summary, tenant_id, project_id, after_position
    )
    found["head"] = await asyncio.to_thread(container.app.max_position)  # for the next call
    return found



async def _decided(
    container: Any, tenant_id: str, edge_id: str, result: CommandResult, wait: bool
) -> dict[str, Any]:
    waited = await wait_if_asked(container, result, wait)
    edge = await asyncio.to_thread(container.kg.store.edge, tenant_id, edge_id) if waited else None
    return {
        "edge_id": edge_id,
        "changed": result.changed,
        "position": result.position,
        "waited": waited,
        "edge": edge,
    }
