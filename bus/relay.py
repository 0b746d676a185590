"""The relay (outbox): publishes each stored event to JetStream in order, once in effect."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType, StreamConfig
from nats.js.errors import KeyNotFoundError, NotFoundError

from bus.subjects import EVENTS_STREAM, EVENTS_SUBJECTS, RELAY_BUCKET
from domain.ports import EventLog

log = logging.getLogger(__name__)

DUPLICATE_WINDOW_S = 600.0


async def ensure_events_stream(js: JetStreamContext) -> None:
    config = StreamConfig(
        name=EVENTS_STREAM,
        subjects=[EVENTS_SUBJECTS],
        storage=StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW_S,
        description="Every event recorded by upstream, in event-store order",
    )
    try:
        await js.stream_info(EVENTS_STREAM)
    except NotFoundError:
        await js.add_stream(config)
        log.info("created JetStream stream %s", EVENTS_STREAM)


class Relay:
    """Reads the notification log after its saved position and publishes each event.

    Each message carries `Nats-Msg-Id = <app>:<position>`, so a re-publish after a crash
    (published, position not yet saved) is dropped by JetStream's duplicate window, and
    projections skip positions they have applied anyway. The position lives in a JetStream
    key-value bucket, so it is as durable as the stream it describes.
    """

    def __init__(
        self, event_log: EventLog, js: JetStreamContext, batch: int = 500, idle_poll_s: float = 0.25
    ) -> None:
        self.event_log = event_log
        self.js = js
        self.batch = batch
        self.idle_poll_s = idle_poll_s
        self.position = 0
        self.published = 0
        self.duplicates = 0
        self._wake = asyncio.Event()
        self._kv: Any = None
        self._task: asyncio.Task[None] | None = None
        self.last_error: str | None = None

    async def start(self) -> None:
        await ensure_events_stream(self.js)
        self._kv = await self.js.create_key_value(
            KeyValueConfig(bucket=RELAY_BUCKET, history=1, storage=StorageType.FILE)
        )
        self.position = await self._load_position()
        log.info("relay resumes after position %d", self.position)
        self._task = asyncio.create_task(self._run(), name="relay")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def wake(self) -> None:
        self._wake.set()

    async def _load_position(self) -> int:
        try:
            entry = await self._kv.get("position")
        except KeyNotFoundError:
            return 0
        return int(entry.value.decode()) if entry.value else 0

    async def _run(self) -> None:
        while True:
            try:
                published = await self.publish_pending()
                self.last_error = None
            except asyncio.CancelledError:
                raise
            except Exception as error:  # NATS restart, store busy: retry, never skip
                self.last_error = f"{type(error).__name__}: {error}"
                log.warning("relay failed at position %d (%s); retrying", self.position, error)
                await asyncio.sleep(1.0)
                continue
            if not published:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.idle_poll_s)

    async def publish_pending(self) -> int:
        """Publish one batch after the saved position; returns how many were published."""
        envelopes = await asyncio.to_thread(self.event_log.read, self.position, self.batch)
        if not envelopes:
            return 0
        started = time.perf_counter()
        futures = [
            await self.js.publish_async(
                e.subject,
                e.to_json(),
                stream=EVENTS_STREAM,
                headers={"Nats-Msg-Id": e.msg_id},
            )
            for e in envelopes
        ]
        acks = await asyncio.gather(*futures)
        self.duplicates += sum(1 for ack in acks if ack.duplicate)
        self.published += len(envelopes)
        self.position = envelopes[-1].position
        await self._kv.put("position", str(self.position).encode())
        log.debug(
            "relayed %d events up to %d in %.1f ms",
            len(envelopes),
            self.position,
            (time.perf_counter() - started) * 1000,
        )
        return len(envelopes)

    def lag(self) -> int:
        return max(0, self.event_log.max_position() - self.position)
