"""Command intake: FastStream subscribers on `cmd.*` that answer each request with a result."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from faststream.nats import NatsBroker
from pydantic import ValidationError

from bus.cache_subjects import CMD_CACHE_INVALIDATE
from bus.collection_subjects import (
    CMD_COLLECTION_ADD_DOCUMENTS,
    CMD_COLLECTION_CREATE,
    CMD_COLLECTION_DELETE,
    CMD_COLLECTION_EMPTY,
    CMD_COLLECTION_UPDATE_METADATA,
)
from bus.kg_subjects import kg_routes
from bus.model_config_subjects import (
    CMD_MODEL_CONFIG_CREATE,
    CMD_MODEL_CONFIG_DELETE,
    CMD_MODEL_CONFIG_SEED,
    CMD_MODEL_CONFIG_UPDATE,
)
from bus.subjects import CMD_DELETE_FILE, CMD_INGEST_FILE, CMD_RECORD_SNAPSHOT, COMMAND_QUEUE
from bus.tag_subjects import CMD_TAG_ASSIGN_OWNER, CMD_TAG_REMOVE_OWNER
from commands.application import UpstreamApplication
from commands.cache import InvalidateCache
from commands.collections import (
    AddDocuments,
    CreateCollection,
    DeleteCollection,
    EmptyCollection,
    UpdateCollectionMetadata,
)
from commands.model_config import (
    CreateModelConfig,
    DeleteModelConfig,
    SeedModelConfigs,
    UpdateModelConfig,
)
from commands.models import (
    Command,
    CommandResult,
    DeleteFile,
    IngestFile,
    RecordRepositorySnapshot,
)
from commands.tags import AssignTagOwner, RemoveTagOwner
from domain.errors import InvalidCommand, UpstreamError

log = logging.getLogger(__name__)


def invalid_payload(error: ValidationError) -> CommandResult:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in error.errors()
    )
    return CommandResult.failed(InvalidCommand(f"invalid command payload: {problems}").to_dict())


def register_command_handlers(
    broker: NatsBroker, app: UpstreamApplication, on_recorded: Callable[[], None]
) -> None:
    """Subscribe the write side's handlers; `on_recorded` wakes the relay after a write."""
    routes: list[tuple[str, type[Command], Callable[[Any], CommandResult], str]] = [
        (CMD_INGEST_FILE, IngestFile, app.ingest_file, "IngestFile: record a file's content."),
        (CMD_DELETE_FILE, DeleteFile, app.delete_file, "DeleteFile: retract a file."),
        (
            CMD_RECORD_SNAPSHOT,
            RecordRepositorySnapshot,
            app.record_repository_snapshot,
            "RecordRepositorySnapshot: the files a source holds; the others are deleted.",
        ),
        (
            CMD_MODEL_CONFIG_CREATE,
            CreateModelConfig,
            app.create_model_config,
            "CreateModelConfig: configure a model for a usage type and priority.",
        ),
        (
            CMD_MODEL_CONFIG_UPDATE,
            UpdateModelConfig,
            app.update_model_config,
            "UpdateModelConfig: change a configuration (enable/disable too).",
        ),
        (
            CMD_MODEL_CONFIG_DELETE,
            DeleteModelConfig,
            app.delete_model_config,
            "DeleteModelConfig: delete a configuration.",
        ),
        (
            CMD_MODEL_CONFIG_SEED,
            SeedModelConfigs,
            app.seed_model_configs,
            "SeedModelConfigs: create a seed profile's configurations.",
        ),
        (
            CMD_COLLECTION_CREATE,
            CreateCollection,
            app.create_collection,
            "CreateCollection: create a collection with metadata.",
        ),
        (
            CMD_COLLECTION_UPDATE_METADATA,
            UpdateCollectionMetadata,
            app.update_collection_metadata,
            "UpdateCollectionMetadata: replace or merge a collection's metadata.",
        ),
        (
            CMD_COLLECTION_ADD_DOCUMENTS,
            AddDocuments,
            app.add_documents,
            "AddDocuments: store documents with pre-computed embeddings.",
        ),
        (
            CMD_COLLECTION_EMPTY,
            EmptyCollection,
            app.empty_collection,
            "EmptyCollection: remove every document, keep the metadata.",
        ),
        (
            CMD_COLLECTION_DELETE,
            DeleteCollection,
            app.delete_collection,
            "DeleteCollection: delete a collection.",
        ),
        (
            CMD_CACHE_INVALIDATE,
            InvalidateCache,
            app.invalidate_cache,
            "InvalidateCache: empty the answer caches, the embedding cache, or all.",
        ),
        (
            CMD_TAG_ASSIGN_OWNER,
            AssignTagOwner,
            app.assign_tag_owner,
            "AssignTagOwner: make a user the owner of an access tag.",
        ),
        (
            CMD_TAG_REMOVE_OWNER,
            RemoveTagOwner,
            app.remove_tag_owner,
            "RemoveTagOwner: a tag has no owner any more.",
        ),
        *kg_routes(app),
    ]
    for subject, model, method, description in routes:
        _subscribe(broker, subject, model, method, description, on_recorded)


def _subscribe(
    broker: NatsBroker,
    subject: str,
    model: type[Command],
    method: Callable[[Any], CommandResult],
    description: str,
    on_recorded: Callable[[], None],
) -> None:
    @broker.subscriber(
        subject,
        queue=COMMAND_QUEUE,
        title=subject,
        description=description + " Replies with a CommandResult.",
    )
    async def handler(body: dict[str, Any]) -> dict[str, Any]:
        try:
            command = model.model_validate(body)
        except ValidationError as error:
            return invalid_payload(error).as_dict()
        result = await handle(method, command)
        if result.changed:
            on_recorded()
        return result.as_dict()


async def handle(method: Callable[[Any], CommandResult], command: Any) -> CommandResult:
    try:
        return await asyncio.to_thread(method, command)
    except UpstreamError as error:
        log.info("command %s refused: %s", type(command).__name__, error.message)
        return CommandResult.failed(error.to_dict())
