"""What every projection shares: skip applied positions, apply in order, keep the checkpoint."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from domain.envelope import EventEnvelope


class CheckpointedProjection(ABC):
    """A read model whose last applied position lives in its own store.

    `process` drops the envelopes at or below the checkpoint (duplicate deliveries, replays
    over a live consumer), hands the rest to `_apply`, which writes the view and the
    checkpoint (together where the store allows), and raises on failure so that the runtime
    retries the same envelopes: nothing is ever skipped.
    """

    name: str
    # The event types this read model reads (None: all). Other events only move its position;
    # that position is written at most once a second while nothing relevant arrives, since
    # re-reading an irrelevant event after a crash changes nothing.
    relevant_events: ClassVar[frozenset[str] | None] = None
    idle_checkpoint_s: ClassVar[float] = 1.0

    def __init__(self, store: Any) -> None:
        self.store = store
        self._position: int | None = None
        self._saved_at = 0.0
        self._saved_position = 0

    def start(self) -> None:
        self.store.ensure()

    def position(self) -> int:
        if self._position is None:
            self._position = int(self.store.checkpoint(self.name))
        return self._position

    def process(self, envelopes: Sequence[EventEnvelope]) -> None:
        fresh = [e for e in envelopes if e.position > self.position()]
        if not fresh:
            return
        last = fresh[-1].position
        wanted = self.relevant_events
        relevant = fresh if wanted is None else [e for e in fresh if e.event_type in wanted]
        now = time.monotonic()
        if relevant or now - self._saved_at >= self.idle_checkpoint_s:
            self._apply(relevant, last)
            self._saved_at, self._saved_position = now, last
        self._position = last

    def flush(self) -> None:
        """Write the checkpoint if irrelevant events moved the position since the last write
        (the runtime calls this when the stream is idle, so other processes see it)."""
        if self._position is not None and self._position > self._saved_position:
            self._apply([], self._position)
            self._saved_at, self._saved_position = time.monotonic(), self._position

    def reset(self) -> None:
        self.store.drop()
        self._position = 0
        self._saved_position = 0
        self.start()

    @abstractmethod
    def _apply(self, envelopes: Sequence[EventEnvelope], last: int) -> None:
        """Write the envelopes' effect and record `last` as the checkpoint."""
