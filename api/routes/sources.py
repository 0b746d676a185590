"""Sources: multipart uploads (files or archives) and git repositories, through IngestFile."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Query, Response, UploadFile
from pydantic import BaseModel, Field

from api.deps import ContainerDep
from bus.ingest_batch import BatchTarget, ingest_batch
from commands.sources.archive import ArchiveLimits, ArchiveRefused, is_archive, read_archive
from commands.sources.git import shallow_checkout, tracked_files
from commands.sources.local import LocalFile, Skipped

router = APIRouter(prefix="/api/v1", tags=["ingestion"])


class BatchResponse(BaseModel):
    files: int
    changed: int
    unchanged: int
    refused: list[dict[str, Any]]
    skipped: list[dict[str, str]]
    deleted: list[str]
    position: int
    commit: str | None = None
    waited: bool = False


@router.post("/files/upload", response_model=BatchResponse)
async def upload(
    container: ContainerDep,
    response: Response,
    files: Annotated[list[UploadFile], File(description="Text files, or zip/tar archives")],
    project_id: Annotated[str, Form()] = "default",
    tenant_id: Annotated[str, Form()] = "default",
    tags: Annotated[list[str] | None, Form()] = None,
    dialect: Annotated[str | None, Form()] = None,
    wait: bool = Query(False, description="Return once the read models have applied the writes"),
) -> BatchResponse:
    """Ingest uploaded files; an archive is one repository (files gone from it are deleted)."""
    settings = container.settings
    limits = ArchiveLimits(
        max_members=settings.max_archive_files, max_file_bytes=settings.max_file_bytes
    )
    items: list[LocalFile | Skipped] = []
    archive_names: list[str] = []
    budget = settings.max_upload_bytes
    for upload_file in files:
        data = await upload_file.read(budget + 1)
        budget -= len(data)
        if budget < 0:
            raise ArchiveRefused(f"the upload is larger than {settings.max_upload_bytes} bytes")
        name = upload_file.filename or "upload"
        if is_archive(name):
            archive_names.append(name)
            items.extend(await asyncio.to_thread(_expand, name, data, limits))
        else:
            items.append(_as_text(name, data))
    source = (
        f"upload:{archive_names[0]}" if len(archive_names) == 1 and len(files) == 1 else "upload"
    )
    target = BatchTarget(project_id, tenant_id, tuple(tags or ()), source, dialect)
    result = await ingest_batch(container.command_bus, items, target, snapshot=source != "upload")
    return await _answer(container, response, result, wait)


class GitIngestRequest(BaseModel):
    url: str = Field(description="https://, ssh:// or git@ URL (file:// when allowed)")
    ref: str | None = Field(default=None, description="Branch, tag or commit (default: HEAD)")
    include: list[str] = Field(default_factory=list, description="Glob patterns to keep")
    exclude: list[str] = Field(default_factory=list, description="Glob patterns to drop")
    project_id: str = "default"
    tenant_id: str = "default"
    tags: list[str] = Field(default_factory=list)
    dialect: str | None = None


@router.post("/github/ingest", response_model=BatchResponse)
async def git_ingest(
    body: GitIngestRequest,
    container: ContainerDep,
    response: Response,
    wait: bool = Query(False, description="Return once the read models have applied the writes"),
) -> BatchResponse:
    """Shallow-clone a repository and ingest the files git tracks; records the commit."""
    settings = container.settings
    items, commit = await asyncio.to_thread(_clone_and_read, body, settings)
    target = BatchTarget(body.project_id, body.tenant_id, tuple(body.tags), body.url, body.dialect)
    result = await ingest_batch(
        container.command_bus, items, target, snapshot=True, ref=body.ref, commit=commit
    )
    return await _answer(container, response, result, wait)


def _clone_and_read(body: GitIngestRequest, settings: Any) -> tuple[list[Any], str]:
    with shallow_checkout(
        body.url, body.ref, allow_local=settings.git_allow_local, timeout=settings.git_timeout_s
    ) as checkout:
        files = list(tracked_files(checkout, settings.max_file_bytes, body.include, body.exclude))
        return files, checkout.commit


def _expand(name: str, data: bytes, limits: ArchiveLimits) -> list[LocalFile | Skipped]:
    return list(read_archive(name, data, limits))


def _as_text(name: str, data: bytes) -> LocalFile | Skipped:
    if b"\x00" in data[:8192]:
        return Skipped(name, "binary")
    try:
        return LocalFile(name, data.decode("utf-8"))
    except UnicodeDecodeError:
        return Skipped(name, "not UTF-8 text")


async def _answer(container: Any, response: Response, result: Any, wait: bool) -> BatchResponse:
    if wait and result.position:
        await container.wait_for(result.position)
    if result.refused:
        accepted = result.changed + result.unchanged
        response.status_code = 207 if accepted else 422
    return BatchResponse(**result.to_dict(), waited=bool(wait and result.position))
