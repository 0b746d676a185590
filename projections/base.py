"""What every projection shares: skip applied positions, apply in order, keep the checkpoint."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from domain.envelope import EventEnvelope


class CheckpointedProjection(ABC):
    """A read model whose last applied position lives in its own store.

    `process` drops the envelopes at or below the checkpoint (duplicate deliveries, replays
    over a live consumer), hands the rest to `_apply`, which writes the view and the
    checkpoint (together where the store allows), and raises on failure so that the runtime
    retries the same envelopes: nothing is ever skipped.
    """

    name: str

    def __init__(self, store: Any) -> None:
        self.store = store
        self._position: int | None = None

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
        self._apply(fresh, last)
        self._position = last

    def reset(self) -> None:
        self.store.drop()
        self._position = 0
        self.start()

    @abstractmethod
    def _apply(self, envelopes: Sequence[EventEnvelope], last: int) -> None:
        """Write the envelopes' effect and record `last` as the checkpoint."""
