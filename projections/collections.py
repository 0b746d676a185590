"""The collections projection: collection events into Qdrant (`adapters.qdrant_collections`).

One Qdrant collection per generation of an upstream collection, and a registry of their records
(metadata, dimension, current generation) where the checkpoint lives too. Every step is
idempotent, so a batch that fails half-way is applied again from its first event (see the
adapter's docstring for why emptying is all-or-nothing for readers and survives a crash):

- a record is changed only by an event newer than the record's `position`;
- documents are written only when their event is not older than the current generation (an
  emptying applied later erased them); their point ids are deterministic, so a repeat overwrites;
- the drop of a collection's other generations is repeated on every emptying and deletion.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from domain.envelope import EventEnvelope
from projections.base import CheckpointedProjection

log = logging.getLogger(__name__)

EVENTS = (
    "CollectionCreated",
    "CollectionRecreated",
    "CollectionMetadataUpdated",
    "DocumentsAdded",
    "CollectionEmptied",
    "CollectionDeleted",
)


class CollectionStore(Protocol):
    """What the projection needs from its store (`adapters.qdrant_collections`)."""

    def ensure(self) -> None: ...

    def drop(self) -> None: ...

    def checkpoint(self, name: str) -> int: ...

    def save_checkpoint(self, name: str, position: int) -> None: ...

    def record(self, collection_id: str) -> dict[str, Any] | None: ...

    def put_record(self, record: dict[str, Any]) -> None: ...

    def delete_record(self, collection_id: str) -> None: ...

    def ensure_generation(self, record: dict[str, Any]) -> str: ...

    def drop_other_generations(self, collection_id: str, keep: int | None) -> None: ...

    def upsert_documents(
        self,
        record: dict[str, Any],
        documents: Sequence[dict[str, Any]],
        position: int,
        new_fields: dict[str, str],
    ) -> None: ...


class CollectionsProjection(CheckpointedProjection):
    """Read model `collections`."""

    name = "collections"
    relevant_events = frozenset(EVENTS)

    def __init__(self, store: CollectionStore) -> None:
        super().__init__(store)
        self.collections: CollectionStore = store

    def _apply(self, envelopes: Sequence[EventEnvelope], last: int) -> None:
        for envelope in envelopes:
            if envelope.aggregate == "collection" and envelope.event_type in EVENTS:
                self._apply_one(envelope)
        self.collections.save_checkpoint(self.name, last)

    def _apply_one(self, envelope: EventEnvelope) -> None:
        cid, p, position = envelope.aggregate_id, envelope.payload, envelope.position
        kind = envelope.event_type
        record = self.collections.record(cid)
        if kind in ("CollectionCreated", "CollectionRecreated"):
            if record is not None and int(record["position"]) >= position:
                return
            fresh = {
                "kind": "collection",
                "id": cid,
                "tenant_id": p["tenant_id"],
                "name": p["name"],
                "metadata": dict(p["metadata"]),
                "dimension": p.get("dimension"),
                "embedding_model": p.get("embedding_model"),
                "generation": position,
                "position": position,
                "fields": {},
                "created_position": position,
            }
            if fresh["dimension"] is not None:
                self.collections.ensure_generation(fresh)
            self.collections.put_record(fresh)
            self.collections.drop_other_generations(cid, keep=position)
        elif kind == "CollectionMetadataUpdated":
            if record is None or int(record["position"]) >= position:
                return
            self.collections.put_record(
                {**record, "metadata": dict(p["metadata"]), "position": position}
            )
        elif kind == "DocumentsAdded":
            self._add(record, p, position)
        elif kind == "CollectionEmptied":
            if record is not None and int(record["generation"]) < position:
                switched = {**record, "generation": position, "position": position}
                if switched.get("dimension") is not None:
                    self.collections.ensure_generation(switched)
                self.collections.put_record(switched)  # the switch readers see at once
                record = switched
            if record is not None:
                self.collections.drop_other_generations(cid, keep=int(record["generation"]))
        elif kind == "CollectionDeleted":
            if record is not None:
                self.collections.delete_record(cid)
            self.collections.drop_other_generations(cid, keep=None)

    def _add(self, record: dict[str, Any] | None, p: dict[str, Any], position: int) -> None:
        if record is None or position < int(record["generation"]):
            return  # deleted or emptied by an event this read model has applied already
        updated = {
            **record,
            "fields": {k: list(v) for k, v in (record.get("fields") or {}).items()},
        }
        if updated.get("dimension") is None:
            updated["dimension"] = int(p["dimension"])
        new_fields = merge_fields(updated["fields"], p["documents"])
        self.collections.upsert_documents(updated, p["documents"], position, new_fields)
        updated["position"] = max(int(record["position"]), position)
        self.collections.put_record(updated)


def merge_fields(
    known: dict[str, list[str]], documents: Iterable[dict[str, Any]]
) -> dict[str, str]:
    """Record in `known` the value types of the documents' metadata fields; returns the fields
    seen for the first time with their first type (the payload index a server gets)."""
    new: dict[str, str] = {}
    for document in documents:
        for field, value in document["metadata"].items():
            for item in value if isinstance(value, list) else [value]:
                kind = _value_type(item)
                types = known.setdefault(field, [])
                if not types:
                    new[field] = kind
                if kind not in types:
                    types.append(kind)
    return new


def _value_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "str"
