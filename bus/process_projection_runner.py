"""A projection runner for a read model each process keeps for itself.

The `model_configs` read model is a DuckDB file per query-serving process (DuckDB allows one
writer per file), so every `upstream api` replica applies the configuration events itself:
its consumer must not be shared with the other replicas, as the workers' consumer groups are.

`ProcessProjectionRunner` therefore names its consumer after the process
(`projection-model_configs-<host>-<pid>`), asks only for the subjects the projection reads,
starts at new messages (the process catches up from the event store first, see `follow`), and
sets an inactivity threshold so the server removes the consumer of a replica that died; a
clean stop deletes it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
from collections.abc import Callable, Sequence

from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from bus.projection_runner import ProjectionRunner
from bus.subjects import EVENTS_STREAM, consumer_name
from domain.ports import Projection

log = logging.getLogger(__name__)

MODEL_CONFIG_SUBJECTS: tuple[str, ...] = (
    "events.model_config.>",
    "events.model_config_registry.>",
)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def process_consumer_name(projection: str, host: str | None = None, pid: int | None = None) -> str:
    """`projection-<name>-<host>-<pid>`: unique per process, valid as a consumer name."""
    host = host if host is not None else socket.gethostname()
    pid = pid if pid is not None else os.getpid()
    return _UNSAFE.sub("_", f"{consumer_name(projection)}-{host}-{pid}")[:200]


class ProcessProjectionRunner(ProjectionRunner):
    """A `ProjectionRunner` whose consumer belongs to this process alone."""

    def __init__(
        self,
        js: JetStreamContext,
        projection: Projection,
        lock: asyncio.Lock,
        *,
        subjects: Sequence[str],
        consumer: str | None = None,
        inactive_threshold_s: float = 300.0,
        batch_size: int = 512,
    ) -> None:
        super().__init__(js, projection, lock, batch_size)
        self.subjects = tuple(subjects)
        self._consumer = consumer or process_consumer_name(projection.name)
        self.inactive_threshold_s = inactive_threshold_s

    @property
    def durable(self) -> str:
        return self._consumer

    def consumer_config(self) -> ConsumerConfig:
        return ConsumerConfig(
            durable_name=self.durable,
            description="per-process read model consumer (removed when the process is gone)",
            ack_policy=AckPolicy.ALL,
            deliver_policy=DeliverPolicy.NEW,
            ack_wait=600,
            max_ack_pending=self.batch_size * 4,
            max_deliver=-1,
            filter_subjects=list(self.subjects),
            inactive_threshold=self.inactive_threshold_s,
        )

    async def follow(self, catch_up: Callable[[], int]) -> int:
        """Subscribe (new messages), catch up from the event store, then apply the stream.

        The consumer exists before the catch-up reads the store, so an event recorded after
        the catch-up is delivered; one delivered that the catch-up already applied is skipped
        by the projection (at or below its position). The lock keeps the runner from applying
        anything until the catch-up is done. Returns the events the catch-up applied."""
        async with self.lock:
            await self.start()
            return await asyncio.to_thread(catch_up)

    async def stop(self) -> None:
        await super().stop()
        with contextlib.suppress(Exception):
            await self.js.delete_consumer(EVENTS_STREAM, self.durable)
            log.debug("deleted consumer %s", self.durable)
