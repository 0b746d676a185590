"""The bus as a public interface: subjects and payload schemas, as AsyncAPI 3.0.

Built on a documentation-only broker so the schemas are typed even where the live handlers
take raw dicts (to answer malformed payloads with a clear error instead of a timeout).
"""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsBroker
from faststream.specification import AsyncAPI
from pydantic import BaseModel, Field

from bus.subjects import CMD_DELETE_FILE, CMD_INGEST_FILE, CMD_RECORD_SNAPSHOT
from commands.models import CommandResult, DeleteFile, IngestFile, RecordRepositorySnapshot
from domain.envelope import SCHEMA_VERSION


class ChunkPayload(BaseModel):
    index: int
    text: str = Field(description="May start with a context line (e.g. a def) outside the range")
    line_start: int
    line_end: int
    chunk_type: str = Field(description="sql_view, sql_procedure, python_function, dbt_model, ...")
    name: str | None = Field(description="The statement's target, function or heading")
    parent: str | None = Field(description="E.g. the class of a method")
    tables: list[str]
    columns: list[str]


class RegisteredPayload(BaseModel):
    tenant_id: str
    project_id: str
    path: str


class FileIngestedPayload(BaseModel):
    content_hash: str = Field(description="sha256 of the UTF-8 content")
    size: int
    source: str
    tags: list[str]
    file_urn: str


class FileChunkedPayload(BaseModel):
    tenant_id: str
    project_id: str
    path: str
    file_urn: str
    tags: list[str]
    content_hash: str
    chunks: list[ChunkPayload]
    source: str = Field(description="cli, upload, upload:<archive>, or the repository URL")


class NodePayload(BaseModel):
    urn: str
    kind: str = Field(description="table, view, column, cte, procedure, dbt_model, ...")
    name: str
    project_id: str
    path: str | None
    properties: dict[str, Any]


class EdgePayload(BaseModel):
    edge_id: str
    source: str
    target: str
    rel: str = Field(description="READS_FROM | WRITES_TO | DERIVES | DEFINED_IN")
    project_id: str
    file_path: str
    line_start: int
    line_end: int
    provenance: str = Field(description="parser | llm")
    dialect: str | None
    confidence: float
    conditional: bool
    via: str | None
    properties: dict[str, Any]


class LineageExtractedPayload(BaseModel):
    tenant_id: str
    project_id: str
    path: str
    file_urn: str
    dialect: str | None
    nodes: list[NodePayload] = Field(description="Nodes new or changed since the last version")
    edges: list[EdgePayload] = Field(description="Edges new or changed since the last version")
    warnings: list[str]


class LineageEdgesRetractedPayload(BaseModel):
    tenant_id: str
    project_id: str
    path: str
    edge_ids: list[str]
    reason: str


class FileDeletedPayload(BaseModel):
    tenant_id: str
    project_id: str
    path: str
    file_urn: str
    reason: str


class RepositoryRegisteredPayload(BaseModel):
    tenant_id: str
    project_id: str
    source: str


class RepositorySnapshotRecordedPayload(BaseModel):
    ref: str | None
    commit: str | None
    paths: list[str]
    changed: int
    deleted: list[str]


class DbtProjectDetectedPayload(BaseModel):
    tenant_id: str
    project_id: str
    root: str
    content: str


class DbtProjectChangedPayload(BaseModel):
    content: str


def envelope_schema(name: str, payload: type[BaseModel]) -> type[BaseModel]:
    """The envelope every event travels in, with `payload` typed for one event type."""
    fields: dict[str, Any] = {
        "schema_version": (int, Field(default=SCHEMA_VERSION)),
        "position": (int, Field(description="Event-store position; also Nats-Msg-Id app:pos")),
        "app": (str, "upstream"),
        "aggregate": (str, ...),
        "aggregate_id": (str, ...),
        "aggregate_version": (int, ...),
        "event_type": (str, ...),
        "timestamp": (str, Field(description="ISO 8601")),
        "payload": (payload, ...),
    }
    from pydantic import create_model

    model: type[BaseModel] = create_model(name, **fields)
    return model


EVENT_SCHEMAS: dict[str, tuple[type[BaseModel], str]] = {
    "events.source_file.Registered": (RegisteredPayload, "A file was seen for the first time."),
    "events.source_file.FileIngested": (FileIngestedPayload, "A file's new content was recorded."),
    "events.source_file.FileChunked": (FileChunkedPayload, "A file's chunks, ready to embed."),
    "events.source_file.LineageExtracted": (
        LineageExtractedPayload,
        "What changed in a file's lineage: nodes and edges with evidence (parser provenance).",
    ),
    "events.source_file.LineageEdgesRetracted": (
        LineageEdgesRetractedPayload,
        "Edges a file no longer supports.",
    ),
    "events.source_file.FileDeleted": (FileDeletedPayload, "A file is gone from its source."),
    "events.repository.RepositoryRegistered": (RepositoryRegisteredPayload, "A new source."),
    "events.repository.RepositorySnapshotRecorded": (
        RepositorySnapshotRecordedPayload,
        "The files a source held at an ingest, its commit, and the files deleted since.",
    ),
    "events.dbt_project_record.DbtProjectDetected": (
        DbtProjectDetectedPayload,
        "A dbt_project.yml was ingested for the first time.",
    ),
    "events.dbt_project_record.DbtProjectChanged": (
        DbtProjectChangedPayload,
        "A dbt_project.yml changed.",
    ),
}


def build_asyncapi() -> AsyncAPI:
    broker = NatsBroker()

    @broker.subscriber(
        CMD_INGEST_FILE,
        title=CMD_INGEST_FILE,
        description="IngestFile (request-reply): the reply is a CommandResult with the event "
        "position, or `accepted: false` and an error {code, message, hint}.",
    )
    async def ingest_file(command: IngestFile) -> CommandResult:  # pragma: no cover - docs only
        return CommandResult(accepted=False)

    @broker.subscriber(
        CMD_DELETE_FILE,
        title=CMD_DELETE_FILE,
        description="DeleteFile (request-reply): retract a file's chunks and edges.",
    )
    async def delete_file(command: DeleteFile) -> CommandResult:  # pragma: no cover - docs only
        return CommandResult(accepted=False)

    @broker.subscriber(
        CMD_RECORD_SNAPSHOT,
        title=CMD_RECORD_SNAPSHOT,
        description="RecordRepositorySnapshot (request-reply): the files a source holds now; "
        "files it held before and no longer does are deleted in the same transaction.",
    )
    async def snapshot(command: RecordRepositorySnapshot) -> CommandResult:  # pragma: no cover
        return CommandResult(accepted=False)

    for subject, (payload, description) in EVENT_SCHEMAS.items():
        name = subject.rsplit(".", 1)[-1] + "Event"
        broker.publisher(
            subject,
            title=subject,
            description=description + " Stream EVENTS; Nats-Msg-Id = <app>:<position>.",
            schema=envelope_schema(name, payload),
        )
    return AsyncAPI(
        broker,
        title="upstream bus",
        version="1",
        description="Commands on cmd.*, events on events.<aggregate>.<EventType> (JetStream "
        "stream EVENTS, at-least-once, ordered by position). Payloads carry schema_version.",
    )


def asyncapi_json() -> str:
    return build_asyncapi().to_specification().to_json()
