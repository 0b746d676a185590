"""The bus as a public interface: subjects and payload schemas, as AsyncAPI 3.0.

Built on a documentation-only broker so the schemas are typed even where the live handlers
take raw dicts (to answer malformed payloads with a clear error instead of a timeout).
"""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsBroker
from faststream.specification import AsyncAPI
from pydantic import BaseModel, Field

from bus.cache_subjects import CACHE_EVENT_SCHEMAS
from bus.subjects import CMD_DELETE_FILE, CMD_INGEST_FILE, CMD_RECORD_SNAPSHOT
from bus.tag_subjects import TAG_EVENT_SCHEMAS
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


class OpenPayload(BaseModel):
    """Fields as recorded by the aggregate (see its event method); actor and reason included."""

    model_config = {"extra": "allow"}


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


_OPEN_EVENTS = {
    "events.model_config.ModelConfigCreated": "A model configuration was created.",
    "events.model_config.ModelConfigUpdated": "A configuration changed (state and changes).",
    "events.model_config.ModelConfigDeleted": "A configuration was deleted.",
    "events.model_config_registry.ModelConfigsSeeded": "A seed profile was applied.",
    "events.model_config_registry.ModelConfigsReset": "Every configuration was removed.",
    "events.model_config_registry.ModelConfigRegistryOpened": "A tenant's first configuration.",
    "events.model_config_registry.ModelConfigSlotClaimed": "A (usage_type, priority) slot taken.",
    "events.model_config_registry.ModelConfigSlotReleased": "A slot freed.",
    "events.collection.CollectionCreated": "A collection was created.",
    "events.collection.CollectionRecreated": "A deleted collection name was created again.",
    "events.collection.CollectionMetadataUpdated": "A collection's metadata changed.",
    "events.collection.DocumentsAdded": "Documents with their embeddings were added.",
    "events.collection.CollectionEmptied": "Every document was removed; metadata kept.",
    "events.collection.CollectionDeleted": "A collection was deleted.",
}


def _document_commands(broker: NatsBroker) -> None:
    """Model configuration and collection commands, each with its typed payload."""
    from bus.cache_subjects import CMD_CACHE_INVALIDATE
    from bus.collection_subjects import (
        CMD_COLLECTION_ADD_DOCUMENTS,
        CMD_COLLECTION_CREATE,
        CMD_COLLECTION_DELETE,
        CMD_COLLECTION_EMPTY,
        CMD_COLLECTION_UPDATE_METADATA,
    )
    from bus.model_config_subjects import (
        CMD_MODEL_CONFIG_CREATE,
        CMD_MODEL_CONFIG_DELETE,
        CMD_MODEL_CONFIG_SEED,
        CMD_MODEL_CONFIG_UPDATE,
    )
    from bus.tag_subjects import CMD_TAG_ASSIGN_OWNER, CMD_TAG_REMOVE_OWNER
    from commands import collections as c
    from commands import model_config as m
    from commands import tags as t
    from commands.cache import InvalidateCache

    commands: list[tuple[str, type[BaseModel]]] = [
        (CMD_MODEL_CONFIG_CREATE, m.CreateModelConfig),
        (CMD_MODEL_CONFIG_UPDATE, m.UpdateModelConfig),
        (CMD_MODEL_CONFIG_DELETE, m.DeleteModelConfig),
        (CMD_MODEL_CONFIG_SEED, m.SeedModelConfigs),
        (CMD_COLLECTION_CREATE, c.CreateCollection),
        (CMD_COLLECTION_UPDATE_METADATA, c.UpdateCollectionMetadata),
        (CMD_COLLECTION_ADD_DOCUMENTS, c.AddDocuments),
        (CMD_COLLECTION_EMPTY, c.EmptyCollection),
        (CMD_COLLECTION_DELETE, c.DeleteCollection),
        (CMD_CACHE_INVALIDATE, InvalidateCache),
        (CMD_TAG_ASSIGN_OWNER, t.AssignTagOwner),
        (CMD_TAG_REMOVE_OWNER, t.RemoveTagOwner),
    ]
    for subject, model in commands:
        broker.subscriber(
            subject,
            title=subject,
            description=f"{model.__name__} (request-reply; the reply is a CommandResult).",
        )(_documented_receiver(model))


def _documented_receiver(model: type[BaseModel]) -> Any:
    async def receive(command: BaseModel) -> CommandResult:  # pragma: no cover - docs only
        return CommandResult(accepted=False)

    receive.__annotations__ = {"command": model, "return": CommandResult}
    return receive


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

    _document_commands(broker)
    from bus.kg_asyncapi import document_kg  # it builds on this module's schemas

    document_kg(broker)
    for subject, description in _OPEN_EVENTS.items():
        broker.publisher(
            subject,
            title=subject,
            description=description + " Stream EVENTS; Nats-Msg-Id = <app>:<position>.",
            schema=envelope_schema(subject.rsplit(".", 1)[-1] + "Event", OpenPayload),
        )
    typed = {**EVENT_SCHEMAS, **CACHE_EVENT_SCHEMAS, **TAG_EVENT_SCHEMAS}
    for subject, (payload, description) in typed.items():
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
