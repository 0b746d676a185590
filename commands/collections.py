"""Collection commands and their handlers (a mixin for `UpstreamApplication`).

Each handler loads the tenant's `Collection` aggregate (id = uuid5 of tenant and name),
decides with the domain's rules and saves it; two writers racing on one collection conflict in
the store and the loser decides again. `CommandResult.changed` is True when events were
recorded. An emptying or a deletion answers the number of documents it removed in `deleted`, as
a one-element tuple of its decimal text (the result's schema is shared by every command);
`removed_count(result)` reads it back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import IntegrityError
from pydantic import Field

from commands.models import Command, CommandResult
from domain.collections import Collection, create_collection, not_found, validate_name

if TYPE_CHECKING:
    from eventsourcing.application import Application

    _Base = Application[Any]
else:
    _Base = object

log = logging.getLogger(__name__)

_ATTEMPTS = 3


class CreateCollection(Command):
    """Create a collection; the top-level embedding fields are kept in its metadata."""

    tenant_id: str = "default"
    name: str = Field(description="The collection's name (letters, digits, '.', '_', '-')")
    metadata: Any = Field(default=None, description="Any JSON object")
    embedding_provider: str | None = None
    embedding_model: str | None = None
    dimension: int | None = Field(
        default=None, description="Embedding dimension; the first documents fix it when absent"
    )
    actor: str = "api"


class UpdateCollectionMetadata(Command):
    """Replace the collection's metadata, or merge the given fields over it (`merge`)."""

    tenant_id: str = "default"
    name: str
    metadata: Any = Field(default=None, description="Any JSON object")
    merge: bool = False
    actor: str = "api"


class AddDocuments(Command):
    """Store documents with pre-computed embeddings; an existing id is replaced.

    `documents` is taken as sent and validated by the domain, so that a missing array or a
    missing embedding is answered with the spec's message (400) rather than a schema error."""

    tenant_id: str = "default"
    name: str
    documents: Any = Field(
        default=None, description="[{id?, text, metadata?, embedding: [numbers]}]"
    )
    actor: str = "api"


class EmptyCollection(Command):
    """Remove every document of a collection; the collection and its metadata stay."""

    tenant_id: str = "default"
    name: str
    actor: str = "api"


class DeleteCollection(Command):
    """Delete a collection and its documents."""

    tenant_id: str = "default"
    name: str
    actor: str = "api"


def removed_count(result: CommandResult) -> int:
    """The number of documents an `EmptyCollection` or a `DeleteCollection` removed."""
    return int(result.deleted[0]) if result.deleted else 0


class CollectionCommands(_Base):
    """Handlers for the collection commands, against `repository` and `save`."""

    def create_collection(self, cmd: CreateCollection) -> CommandResult:
        def decide() -> CommandResult:
            validate_name(cmd.name)
            existing = self._collection_or_none(cmd.tenant_id, cmd.name)
            collection = create_collection(
                existing,
                cmd.tenant_id,
                cmd.name,
                cmd.metadata,
                embedding_provider=cmd.embedding_provider,
                embedding_model=cmd.embedding_model,
                dimension=cmd.dimension,
                actor=cmd.actor,
            )
            return self._saved_collection(collection)

        return self._retrying_collection(decide)

    def update_collection_metadata(self, cmd: UpdateCollectionMetadata) -> CommandResult:
        def decide() -> CommandResult:
            collection = self._existing_collection(cmd.tenant_id, cmd.name)
            collection.update_metadata(cmd.metadata, cmd.merge, cmd.actor)
            return self._saved_collection(collection)

        return self._retrying_collection(decide)

    def add_documents(self, cmd: AddDocuments) -> CommandResult:
        def decide() -> CommandResult:
            collection = self._existing_collection(cmd.tenant_id, cmd.name)
            collection.add_documents(cmd.documents, cmd.actor)
            return self._saved_collection(collection)

        return self._retrying_collection(decide)

    def empty_collection(self, cmd: EmptyCollection) -> CommandResult:
        def decide() -> CommandResult:
            collection = self._existing_collection(cmd.tenant_id, cmd.name)
            count = collection.empty(cmd.actor)
            return self._saved_collection(collection, str(count))

        return self._retrying_collection(decide)

    def delete_collection(self, cmd: DeleteCollection) -> CommandResult:
        def decide() -> CommandResult:
            collection = self._existing_collection(cmd.tenant_id, cmd.name)
            count = collection.delete(cmd.actor)
            return self._saved_collection(collection, str(count))

        return self._retrying_collection(decide)

    # -- helpers ----------------------------------------------------------------------------
    def _retrying_collection(self, decide: Callable[[], CommandResult]) -> CommandResult:
        for attempt in range(_ATTEMPTS):
            try:
                return decide()
            except IntegrityError:  # another writer changed the collection first: decide again
                log.info("concurrent collection write, retrying (%d)", attempt + 1)
        return decide()

    def _collection_or_none(self, tenant_id: str, name: str) -> Collection | None:
        aggregate_id = Collection.create_id(tenant_id, name)
        if aggregate_id in self.repository:
            collection: Collection = self.repository.get(aggregate_id)
            return collection
        return None

    def _existing_collection(self, tenant_id: str, name: str) -> Collection:
        collection = self._collection_or_none(tenant_id, name)
        if collection is None or collection.deleted:
            raise not_found(name)
        return collection

    def _saved_collection(self, collection: Collection, *detail: str) -> CommandResult:
        recordings = self.save(collection)
        return CommandResult(
            accepted=True,
            aggregate_id=str(collection.id),
            position=max(r.notification.id for r in recordings),
            changed=True,
            deleted=tuple(detail),
        )
