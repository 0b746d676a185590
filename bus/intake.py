"""Command intake: FastStream subscribers on `cmd.*` that answer each request with a result."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from faststream.nats import NatsBroker
from pydantic import ValidationError

from bus.subjects import CMD_INGEST_FILE, COMMAND_QUEUE
from commands.application import UpstreamApplication
from commands.models import CommandResult, IngestFile
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

    @broker.subscriber(
        CMD_INGEST_FILE,
        queue=COMMAND_QUEUE,
        title="cmd.ingest_file",
        description="IngestFile: record a file's content. Replies with a CommandResult.",
    )
    async def ingest_file(body: dict[str, Any]) -> dict[str, Any]:
        try:
            command = IngestFile.model_validate(body)
        except ValidationError as error:
            return invalid_payload(error).as_dict()
        result = await handle(app.ingest_file, command)
        if result.changed:
            on_recorded()
        return result.as_dict()


async def handle(method: Callable[[Any], CommandResult], command: Any) -> CommandResult:
    try:
        return await asyncio.to_thread(method, command)
    except UpstreamError as error:
        log.info("command %s refused: %s", type(command).__name__, error.message)
        return CommandResult.failed(error.to_dict())
