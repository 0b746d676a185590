"""The tag owners projection: `TagOwnerAssigned` / `TagOwnerRemoved` into an in-memory book.

The read model is small (one row per owned tag, plus each tag's events for the audit trail), so
it lives in memory and is rebuilt from the event store at every start:

- `serve` and `worker` processes register it with the other projections: the container's
  catch-up fills it at start, then the live runner applies the events JetStream delivers.
- an `api` process runs no projection; `StoreFollower` brings the book up to date from the
  event store before each read, selecting only the tag events (a filter on the stored topic,
  so nothing else is decoded).

The book writes its view and its checkpoint under one lock, so they always agree.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

from eventsourcing.utils import get_topic

from domain.envelope import EventEnvelope
from domain.tags import TagDirectory
from projections.base import CheckpointedProjection

EVENTS = ("TagOwnerAssigned", "TagOwnerRemoved")


class TagOwnerBook:
    """The read model: each tenant's owned tags and each tag's events, with a checkpoint."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._owners: dict[tuple[str, str], dict[str, Any]] = {}
        self._history: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._checkpoint = 0

    # -- the store's side, for the projection ---------------------------------------------
    def ensure(self) -> None:
        return None

    def drop(self) -> None:
        with self.lock:
            self._owners.clear()
            self._history.clear()
            self._checkpoint = 0

    def checkpoint(self, name: str = "tag_owners") -> int:
        with self.lock:
            return self._checkpoint

    def apply(self, envelopes: Sequence[EventEnvelope], last: int) -> None:
        """Write the events' effect and the checkpoint together."""
        with self.lock:
            for envelope in envelopes:
                if envelope.event_type in EVENTS:
                    self._apply_one(envelope)
            self._checkpoint = max(self._checkpoint, last)

    def _apply_one(self, envelope: EventEnvelope) -> None:
        p = envelope.payload
        key = (str(p["tenant_id"]), str(p["tag"]))
        entry = {
            "position": envelope.position,
            "event_type": envelope.event_type,
            "actor": p["actor"],
            "at": envelope.timestamp,
        }
        if envelope.event_type == "TagOwnerAssigned":
            entry |= {"owner_user_id": p["owner_user_id"], "owner_email": p["owner_email"]}
            self._owners[key] = {
                "tag": key[1],
                "owner_user_id": p["owner_user_id"],
                "owner_email": p["owner_email"],
                "assigned_by": p["actor"],
                "assigned_at": envelope.timestamp,
            }
        else:
            entry |= {"owner_user_id": p["previous_owner_user_id"], "owner_email": None}
            self._owners.pop(key, None)
        self._history.setdefault(key, []).append(entry)

    # -- reads ------------------------------------------------------------------------------
    def owner(self, tenant_id: str, tag: str) -> dict[str, Any] | None:
        with self.lock:
            found = self._owners.get((tenant_id, tag))
            return dict(found) if found is not None else None

    def owners(self, tenant_id: str) -> list[dict[str, Any]]:
        with self.lock:
            rows = [dict(v) for (t, _), v in self._owners.items() if t == tenant_id]
        return sorted(rows, key=lambda r: str(r["tag"]))

    def history(self, tenant_id: str, tag: str) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(e) for e in self._history.get((tenant_id, tag), [])]

    def dump(self) -> tuple[list[Any], list[Any]]:
        """Every owner and every history entry, sorted: to compare a rebuild with the live."""
        with self.lock:
            owners = sorted((k, sorted(v.items())) for k, v in self._owners.items())
            history = sorted(
                (k, [sorted(e.items()) for e in entries]) for k, entries in self._history.items()
            )
        return owners, history


class TagOwnersProjection(CheckpointedProjection):
    """Read model `tag_owners` (see the module's docstring)."""

    name = "tag_owners"
    relevant_events = frozenset(EVENTS)

    def __init__(
        self, book: TagOwnerBook | None = None, source: NotificationSource | None = None
    ) -> None:
        super().__init__(book or TagOwnerBook())
        self.book: TagOwnerBook = self.store
        self.follower = StoreFollower(self, source) if source is not None else None

    def start(self) -> None:
        """Fill the book from the event store's tag events, when it has a source: the generic
        catch-up that follows then finds nothing left to decode."""
        super().start()
        self.follow()

    def follow(self) -> int:
        """Apply the tag events stored since the last read (nothing without a source)."""
        if self.follower is None:
            return self.position()
        return self.follower.follow()

    def process(self, envelopes: Sequence[EventEnvelope]) -> None:
        with self.book.lock:  # the live runner, a replay and a store follower may overlap
            super().process(envelopes)

    def reset(self) -> None:
        """Empty the book, ready for a rebuild from position 0 (`start()` is not repeated, so
        the rebuild really applies the whole log)."""
        with self.book.lock:
            self.book.drop()
            self._position = self._saved_position = 0

    def advance(self, position: int) -> None:
        """Record that no tag event happened up to `position` (after a topic-filtered read)."""
        with self.book.lock:
            if position > self.position():
                self._apply([], position)
                self._position = self._saved_position = position

    def _apply(self, envelopes: Sequence[EventEnvelope], last: int) -> None:
        self.book.apply(envelopes, last)


class NotificationSource(Protocol):
    """The write side's event store as `StoreFollower` reads it (`UpstreamApplication`)."""

    recorder: Any

    def max_position(self) -> int: ...

    def to_envelope(self, notification: Any) -> EventEnvelope: ...


TOPICS = tuple(get_topic(getattr(TagDirectory, name)) for name in EVENTS)


class StoreFollower:
    """Brings the projection up to date from the event store, reading only the tag events."""

    def __init__(
        self, projection: TagOwnersProjection, source: NotificationSource, batch: int = 512
    ) -> None:
        self.projection = projection
        self.source = source
        self.batch = batch

    def follow(self) -> int:
        """Apply every tag event stored after the read model's position; returns the position
        reached (the store's head when the call began)."""
        with self.projection.book.lock:
            target = self.source.max_position()
            while self.projection.position() < target:
                notifications = self.source.recorder.select_notifications(
                    start=self.projection.position(),
                    limit=self.batch,
                    stop=target,
                    topics=TOPICS,
                    inclusive_of_start=False,
                )
                if not notifications:
                    break
                self.projection.process([self.source.to_envelope(n) for n in notifications])
            self.projection.advance(target)
            return self.projection.position()
