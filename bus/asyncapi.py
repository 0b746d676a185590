"""The bus as a public interface: subjects and payload schemas, as AsyncAPI 3.0.

Built on a documentation-only broker so the schemas are typed even where the live handlers
take raw dicts (to answer malformed payloads with a clear error instead of a timeout).
"""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsBroker
from faststream.specification import AsyncAPI
from pydantic import BaseModel, Field

from bus.subjects import CMD_INGEST_FILE
from commands.models import CommandResult, IngestFile
from domain.envelope import SCHEMA_VERSION


class ChunkPayload(BaseModel):
    index: int
    text: str
    line_start: int
    line_end: int
    chunk_type: str


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
