"""Dependency aliases for the routers."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Header, Query, Request

from adapters.bootstrap import Container
from commands.models import Command, CommandResult


def get_container(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


ContainerDep = Annotated[Container, Depends(get_container)]

# Writes: a command over the bus, then (with ?wait=true) the read models catch up to it.
Wait = Annotated[bool, Query(description="Return once the read models have applied the write")]
Actor = Annotated[str, Header(alias="X-Actor", description="Who makes the change (audit trail)")]


async def send_command(container: Any, subject: str, command: Command) -> CommandResult:
    result: CommandResult = await container.command_bus.send(subject, command)
    return result


async def wait_if_asked(container: Any, result: CommandResult, wait: bool) -> bool:
    """Whether it waited: only when asked and the write recorded something."""
    if wait and result.position:
        await container.wait_for(result.position)
        return True
    return False
