"""Tag owner commands and their handlers (a mixin for `UpstreamApplication`).

Each handler loads the tenant's `TagDirectory` (id = uuid5 of the tenant), decides with the
domain's rules and saves it; two writers racing on one tenant conflict in the store and the
loser decides again. `CommandResult.changed` is False when nothing was recorded (the same owner
assigned again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import IntegrityError
from pydantic import Field

from commands.models import Command, CommandResult
from domain.tags import TagDirectory, no_owner, validate_owner, validate_tag

if TYPE_CHECKING:
    from eventsourcing.application import Application

    _Base = Application[Any]
else:
    _Base = object

log = logging.getLogger(__name__)

_ATTEMPTS = 3


class AssignTagOwner(Command):
    """Make a user the owner of an access tag (low-confidence answers are routed to them)."""

    tenant_id: str = "default"
    tag: str = Field(description="The access tag, as carried by the documents (1-100 chars)")
    owner_user_id: str = Field(description="The owner's user id")
    owner_email: str | None = Field(
        default=None, description="Where routed questions go; without it routing uses the admin"
    )
    actor: str = "api"


class RemoveTagOwner(Command):
    """Remove a tag's owner (routing falls back to the admin)."""

    tenant_id: str = "default"
    tag: str
    actor: str = "api"


class TagCommands(_Base):
    """Handlers for the tag owner commands, against `repository` and `save`."""

    def assign_tag_owner(self, cmd: AssignTagOwner) -> CommandResult:
        validate_tag(cmd.tag)
        validate_owner(cmd.owner_user_id, cmd.owner_email)

        def decide() -> CommandResult:
            directory = self._tag_directory(cmd.tenant_id) or TagDirectory(cmd.tenant_id)
            if not directory.assign(cmd.tag, cmd.owner_user_id, cmd.owner_email, cmd.actor):
                position = self.recorder.max_notification_id() or 0
                return CommandResult(
                    accepted=True, aggregate_id=str(directory.id), position=position
                )
            return self._saved_directory(directory)

        return self._retrying_tags(decide)

    def remove_tag_owner(self, cmd: RemoveTagOwner) -> CommandResult:
        tag = validate_tag(cmd.tag)

        def decide() -> CommandResult:
            directory = self._tag_directory(cmd.tenant_id)
            if directory is None:
                raise no_owner(tag, cmd.tenant_id)
            directory.remove(tag, cmd.actor)
            return self._saved_directory(directory)

        return self._retrying_tags(decide)

    # -- helpers ----------------------------------------------------------------------------
    def _retrying_tags(self, decide: Callable[[], CommandResult]) -> CommandResult:
        for attempt in range(_ATTEMPTS):
            try:
                return decide()
            except IntegrityError:  # another writer changed the tenant's tags first: decide again
                log.info("concurrent tag owner write, retrying (%d)", attempt + 1)
        return decide()

    def _tag_directory(self, tenant_id: str) -> TagDirectory | None:
        aggregate_id = TagDirectory.create_id(tenant_id)
        if aggregate_id in self.repository:
            directory: TagDirectory = self.repository.get(aggregate_id)
            return directory
        return None

    def _saved_directory(self, directory: TagDirectory) -> CommandResult:
        recordings = self.save(directory)
        return CommandResult(
            accepted=True,
            aggregate_id=str(directory.id),
            position=max(r.notification.id for r in recordings),
            changed=True,
        )
