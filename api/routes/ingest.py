"""Ingestion: files as JSON, each one an `IngestFile` command on the bus."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from api.deps import ContainerDep
from bus.subjects import CMD_INGEST_FILE, CMD_RECORD_SNAPSHOT
from commands.models import IngestFile, RecordRepositorySnapshot
from domain.errors import UpstreamError

router = APIRouter(prefix="/api/v1", tags=["ingestion"])


class FileIn(BaseModel):
    path: str = Field(description="Path relative to the repository root")
    content: str = Field(description="The file's text")


class IngestRequest(BaseModel):
    project_id: str = "default"
    tenant_id: str = "default"
    tags: list[str] = Field(default_factory=list)
    source: str = "upload"
    files: list[FileIn] = Field(min_length=1, max_length=1000)


class FileResult(BaseModel):
    path: str
    accepted: bool
    changed: bool = False
    position: int | None = None
    error: dict[str, str] | None = None


class IngestResponse(BaseModel):
    position: int
    accepted: int
    changed: int
    refused: int
    waited: bool
    files: list[FileResult]


@router.post("/ingest", response_model=IngestResponse)
async def ingest(
    body: IngestRequest,
    container: ContainerDep,
    response: Response,
    wait: bool = Query(False, description="Return once the read models have applied the writes"),
) -> IngestResponse:
    """Ingest files; unchanged files record nothing. 207 when some files were refused."""
    results = [await _ingest_one(container, body, f) for f in body.files]
    position = max((r.position or 0 for r in results), default=0)
    if wait and position:
        await container.wait_for(position)
    refused = sum(1 for r in results if not r.accepted)
    if refused:
        response.status_code = 422 if refused == len(results) else 207
    return IngestResponse(
        position=position,
        accepted=len(results) - refused,
        changed=sum(1 for r in results if r.changed),
        refused=refused,
        waited=bool(wait and position),
        files=results,
    )


class SnapshotRequest(BaseModel):
    project_id: str = "default"
    tenant_id: str = "default"
    source: str = Field(description="Names the source, e.g. local:/path/to/repo or a git URL")
    paths: list[str] = Field(description="Every file the source holds now")
    ref: str | None = None
    commit: str | None = None


class SnapshotResponse(BaseModel):
    position: int
    deleted: list[str]
    waited: bool


@router.post("/repositories/snapshot", response_model=SnapshotResponse)
async def snapshot(
    body: SnapshotRequest,
    container: ContainerDep,
    wait: bool = Query(False, description="Return once the read models have applied the writes"),
) -> SnapshotResponse:
    """Record the files a source holds; files it held before and no longer does are deleted."""
    command = RecordRepositorySnapshot(
        project_id=body.project_id,
        tenant_id=body.tenant_id,
        source=body.source,
        paths=tuple(body.paths),
        ref=body.ref,
        commit=body.commit,
    )
    result = await container.command_bus.send(CMD_RECORD_SNAPSHOT, command)
    position = result.position or 0
    if wait and position:
        await container.wait_for(position)
    return SnapshotResponse(position=position, deleted=list(result.deleted), waited=wait)


async def _ingest_one(container: Any, body: IngestRequest, file: FileIn) -> FileResult:
    command = IngestFile(
        project_id=body.project_id,
        tenant_id=body.tenant_id,
        tags=tuple(body.tags),
        source=body.source,
        path=file.path,
        content=file.content,
    )
    try:
        result = await container.command_bus.send(CMD_INGEST_FILE, command)
    except UpstreamError as error:
        if error.code == "service_unavailable":
            raise
        return FileResult(path=file.path, accepted=False, error=error.to_dict())
    return FileResult(
        path=file.path, accepted=True, changed=result.changed, position=result.position
    )
