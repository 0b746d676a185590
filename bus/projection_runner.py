"""Runs one projection as a durable, in-order JetStream consumer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from bus.relay import ensure_events_stream
from bus.subjects import EVENTS_STREAM, EVENTS_SUBJECTS, consumer_name
from domain.envelope import EventEnvelope
from domain.ports import Projection

log = logging.getLogger(__name__)


class ProjectionRunner:
    """Fetches batches in stream order and hands them to the projection in one piece.

    One fetch loop, no concurrent handlers: the order of the stream is the order of
    application. A batch that fails is retried, whole, with backoff, until it succeeds; the
    messages are kept in progress meanwhile, so nothing is skipped and nothing is redelivered
    out of order. Acknowledgement is cumulative (AckPolicy.ALL) after the read model and its
    checkpoint are written.
    """

    def __init__(
        self,
        js: JetStreamContext,
        projection: Projection,
        lock: asyncio.Lock,
        batch_size: int = 512,
        fetch_timeout_s: float = 0.5,
        max_backoff_s: float = 30.0,
        linger_s: float = 0.05,
        linger_rounds: int = 4,
    ) -> None:
        self.js = js
        self.projection = projection
        self.lock = lock
        self.batch_size = batch_size
        self.fetch_timeout_s = fetch_timeout_s
        self.max_backoff_s = max_backoff_s
        self.linger_s = linger_s
        self.linger_rounds = linger_rounds
        self.failures = 0
        self.last_error: str | None = None
        self.applied = 0
        self._task: asyncio.Task[None] | None = None
        self._sub: Any = None

    @property
    def name(self) -> str:
        return self.projection.name

    @property
    def durable(self) -> str:
        """The consumer's name: shared by every replica (a consumer group)."""
        return consumer_name(self.name)

    def consumer_config(self) -> ConsumerConfig:
        return ConsumerConfig(
            durable_name=self.durable,
            ack_policy=AckPolicy.ALL,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=600,
            max_ack_pending=self.batch_size * 4,
            max_deliver=-1,
            filter_subject=EVENTS_SUBJECTS,
        )

    async def start(self) -> None:
        await ensure_events_stream(self.js)
        self._sub = await self.js.pull_subscribe(
            EVENTS_SUBJECTS,
            durable=self.durable,
            stream=EVENTS_STREAM,
            config=self.consumer_config(),
        )
        self._task = asyncio.create_task(self._run(), name=f"projection-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None

    async def _run(self) -> None:
        while True:
            try:
                messages = await self._sub.fetch(self.batch_size, timeout=self.fetch_timeout_s)
            except (NatsTimeoutError, TimeoutError):
                await self._flush_when_idle()
                continue
            except asyncio.CancelledError:
                raise
            except Exception as error:  # connection lost: nats-py reconnects; wait and fetch
                log.warning("projection %s: fetch failed (%s)", self.name, error)
                await asyncio.sleep(1.0)
                continue
            if messages:
                await self._apply_until_done(await self._top_up(messages))

    async def _flush_when_idle(self) -> None:
        flush = getattr(self.projection, "flush", None)
        if flush is None:
            return
        try:
            async with self.lock:
                await asyncio.to_thread(flush)
        except Exception as error:  # retried at the next idle moment
            log.warning("projection %s: checkpoint flush failed (%s)", self.name, error)

    async def _top_up(self, messages: list[Any]) -> list[Any]:
        """Micro-batching: during a burst, wait a moment for more so the model sees full
        batches (one embed call of 500 chunks beats fifty of 10)."""
        for _ in range(self.linger_rounds):
            if len(messages) >= self.batch_size:
                break
            try:
                more = await self._sub.fetch(self.batch_size - len(messages), timeout=self.linger_s)
            except (NatsTimeoutError, TimeoutError):
                break
            messages.extend(more)
        return messages

    async def _apply_until_done(self, messages: list[Any]) -> None:
        envelopes = [EventEnvelope.from_json(m.data) for m in messages]
        backoff = 0.5
        while True:
            try:
                started = time.perf_counter()
                async with self.lock:
                    await asyncio.to_thread(self.projection.process, envelopes)
                self._record_success(envelopes, started)
                await messages[-1].ack()
                return
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self.failures += 1
                self.last_error = f"{type(error).__name__}: {error}"
                log.error(
                    "projection %s failed on positions %d-%d (%s); retrying in %.1f s",
                    self.name,
                    envelopes[0].position,
                    envelopes[-1].position,
                    self.last_error,
                    backoff,
                )
                with contextlib.suppress(Exception):
                    await messages[-1].in_progress()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)

    def _record_success(self, envelopes: list[EventEnvelope], started: float) -> None:
        self.applied += len(envelopes)
        self.last_error = None
        log.debug(
            "projection %s applied positions %d-%d in %.1f ms",
            self.name,
            envelopes[0].position,
            envelopes[-1].position,
            (time.perf_counter() - started) * 1000,
        )
