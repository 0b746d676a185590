"""A batch of files from one source through the command path, with progress and a snapshot."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bus.subjects import CMD_INGEST_FILE, CMD_RECORD_SNAPSHOT
from commands.models import IngestFile, RecordRepositorySnapshot
from commands.sources.local import LocalFile, Skipped, project_files_first
from domain.errors import ServiceUnavailable, UpstreamError

Progress = Callable[[int, int], None]


@dataclass
class BatchResult:
    files: int = 0
    changed: int = 0
    unchanged: int = 0
    refused: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    position: int = 0
    commit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "refused": self.refused,
            "skipped": self.skipped,
            "deleted": self.deleted,
            "position": self.position,
            "commit": self.commit,
        }


@dataclass(frozen=True, slots=True)
class BatchTarget:
    project_id: str = "default"
    tenant_id: str = "default"
    tags: tuple[str, ...] = ()
    source: str = "upload"
    dialect: str | None = None


async def ingest_batch(
    command_bus: Any,
    items: Sequence[LocalFile | Skipped],
    target: BatchTarget,
    *,
    snapshot: bool = False,
    ref: str | None = None,
    commit: str | None = None,
    progress: Progress | None = None,
) -> BatchResult:
    """Send one IngestFile per file; with `snapshot`, files gone from the source are deleted."""
    files = project_files_first([i for i in items if isinstance(i, LocalFile)])
    result = BatchResult(files=len(files), commit=commit)
    result.skipped = [{"path": i.path, "reason": i.reason} for i in items if isinstance(i, Skipped)]
    accepted: list[str] = []
    for done, file in enumerate(files, start=1):
        if await _ingest_one(command_bus, file, target, result):
            accepted.append(file.path)
        if progress is not None:
            progress(done, len(files))
    if snapshot:
        await _record_snapshot(command_bus, target, accepted, ref, commit, result)
    return result


async def _ingest_one(bus: Any, file: LocalFile, target: BatchTarget, result: BatchResult) -> bool:
    command = IngestFile(
        project_id=target.project_id,
        tenant_id=target.tenant_id,
        tags=target.tags,
        source=target.source,
        path=file.path,
        content=file.content,
        dialect=target.dialect,
    )
    try:
        reply = await bus.send(CMD_INGEST_FILE, command)
    except ServiceUnavailable:
        raise
    except UpstreamError as error:
        result.refused.append({"path": file.path, "error": error.to_dict()})
        return False
    result.position = max(result.position, reply.position or 0)
    if reply.changed:
        result.changed += 1
    else:
        result.unchanged += 1
    return True


async def _record_snapshot(
    bus: Any,
    target: BatchTarget,
    paths: list[str],
    ref: str | None,
    commit: str | None,
    result: BatchResult,
) -> None:
    command = RecordRepositorySnapshot(
        project_id=target.project_id,
        tenant_id=target.tenant_id,
        source=target.source,
        ref=ref,
        commit=commit,
        paths=tuple(paths),
        changed=result.changed,
    )
    reply = await bus.send(CMD_RECORD_SNAPSHOT, command)
    result.deleted = list(reply.deleted)
    result.position = max(result.position, reply.position or 0)
