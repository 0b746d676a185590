"""Sends commands over NATS request-reply and turns a refused command back into its error."""

from __future__ import annotations

import json

from faststream.nats import NatsBroker

from commands.models import Command, CommandResult
from domain.errors import ServiceUnavailable, error_from_dict


class CommandBus:
    """The API's way to the write side: a command out on `cmd.<name>`, a result back."""

    def __init__(self, broker: NatsBroker, timeout_s: float = 60.0) -> None:
        self.broker = broker
        self.timeout_s = timeout_s

    async def send(self, subject: str, command: Command) -> CommandResult:
        try:
            reply = await self.broker.request(
                command.model_dump(mode="json"), subject, timeout=self.timeout_s
            )
        except TimeoutError as error:
            raise ServiceUnavailable(
                f"no command handler answered on {subject} within {self.timeout_s:.0f} s"
            ) from error
        body = reply.body
        result = CommandResult.model_validate(json.loads(body) if isinstance(body, bytes) else body)
        if not result.accepted and result.error is not None:
            raise error_from_dict(result.error)
        return result
