"""Commands: immutable, imperative requests to change state. They travel on `cmd.<name>`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

COMMAND_SCHEMA_VERSION = 1


class Command(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = COMMAND_SCHEMA_VERSION


class IngestFile(Command):
    """Record one file's content for a project; unchanged content records nothing."""

    project_id: str = Field(default="default", description="Project the file belongs to")
    path: str = Field(description="Path relative to the repository root")
    content: str = Field(description="The file's text (UTF-8)")
    source: str = Field(default="upload", description="Where the content came from")
    tenant_id: str = Field(default="default")
    tags: tuple[str, ...] = Field(default=(), description="Access tags carried by its chunks")
    dialect: str | None = Field(default=None, description="SQL dialect (default: detect/ansi)")


class DeleteFile(Command):
    """Record that a file is gone: its chunks and lineage edges are retracted."""

    project_id: str = "default"
    path: str
    tenant_id: str = "default"
    reason: str = "deleted"


class RecordRepositorySnapshot(Command):
    """Record which files a source held (and at which commit); files gone since are deleted."""

    project_id: str = "default"
    tenant_id: str = "default"
    source: str = Field(description="The repository URL or upload name")
    ref: str | None = None
    commit: str | None = None
    paths: tuple[str, ...] = Field(description="Every file path the source holds now")
    changed: int = 0


class CommandResult(BaseModel):
    """The reply to a command: accepted with the event position, or a typed error."""

    model_config = ConfigDict(frozen=True)

    accepted: bool
    aggregate_id: str | None = None
    position: int | None = None
    changed: bool = False
    deleted: tuple[str, ...] = ()
    error: dict[str, str] | None = None

    @classmethod
    def failed(cls, error: dict[str, str]) -> CommandResult:
        return cls(accepted=False, error=error)

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump()
