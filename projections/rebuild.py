"""Feeding a projection straight from the event store: catch-up at start, and full rebuilds."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from domain.ports import EventLog, Projection

log = logging.getLogger(__name__)


def catch_up(
    projection: Projection,
    event_log: EventLog,
    batch: int = 512,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Apply every stored event after the projection's checkpoint; returns how many."""
    applied = 0
    target = event_log.max_position()
    while True:
        envelopes = event_log.read(projection.position(), batch)
        if not envelopes:
            return applied
        projection.process(envelopes)
        applied += len(envelopes)
        if progress is not None:
            progress(projection.position(), target)


def rebuild(
    projection: Projection,
    event_log: EventLog,
    batch: int = 512,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Drop the read model and apply the whole event log again."""
    started = time.perf_counter()
    projection.reset()
    applied = catch_up(projection, event_log, batch, progress)
    log.info(
        "rebuilt projection %s from %d events in %.1f s",
        projection.name,
        applied,
        time.perf_counter() - started,
    )
    return applied
