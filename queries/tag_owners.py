"""Who owns a tag: the read side of the tag owners (rag-service.md, Tag Owner Lookup).

The chat service asks `owner_of(tenant, tag)` when an answer's confidence is low and routes the
question to that user, or to the configured admin when the tag has no owner.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any, Protocol


class TagOwnerReadModel(Protocol):
    """The read model's queries (`projections.tag_owners.TagOwnerBook`)."""

    def owner(self, tenant_id: str, tag: str) -> dict[str, Any] | None: ...

    def owners(self, tenant_id: str) -> list[dict[str, Any]]: ...

    def history(self, tenant_id: str, tag: str) -> list[dict[str, Any]]: ...

    def checkpoint(self, name: str = ...) -> int: ...


class TagOwners:
    """The tags/users read model as the rest of the service reads it.

    `refresh`, when given, brings the read model up to date before each read (an `api` process,
    where no projection runs, follows the event store this way)."""

    def __init__(
        self, book: TagOwnerReadModel, refresh: Callable[[], object] | None = None
    ) -> None:
        self.book = book
        self.refresh = refresh

    def owner_of(self, tenant_id: str, tag: str) -> tuple[str, str | None] | None:
        """(owner_user_id, owner_email) of the tag, or None when it has no owner."""
        found = self.owner(tenant_id, tag)
        if found is None:
            return None
        return str(found["owner_user_id"]), found["owner_email"]

    def owner(self, tenant_id: str, tag: str) -> dict[str, Any] | None:
        """The tag's owner row {tag, owner_user_id, owner_email, assigned_by, assigned_at}."""
        if not isinstance(tag, str) or not tag.strip():
            return None
        self._refresh()
        return self.book.owner(tenant_id, tag.strip())

    def list(self, tenant_id: str) -> builtins.list[dict[str, Any]]:
        """Every owned tag of the tenant, sorted by tag."""
        self._refresh()
        return self.book.owners(tenant_id)

    def history(self, tenant_id: str, tag: str) -> builtins.list[dict[str, Any]]:
        """The tag's events in order: {position, event_type, actor, at, owner_user_id,
        owner_email} (for a removal, the owner removed)."""
        self._refresh()
        return self.book.history(tenant_id, tag.strip())

    def position(self) -> int:
        """The last event position the read model reflects (after a refresh)."""
        self._refresh()
        return self.book.checkpoint()

    def _refresh(self) -> None:
        if self.refresh is not None:
            self.refresh()
