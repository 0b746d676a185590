"""Runs the KG enrichment policy on live events (a JetStream consumer of its own).

The consumer is durable and shared by the workers (one of them handles each event), asks only
for the subjects the policy reacts to, and is created at the stream's end (DeliverPolicy.NEW):
the policy acts on what happens from the moment it first ran, never on history, and after a
restart it resumes where it acknowledged. The work happens here, after the events are
recorded: ingestion never waits for a model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from bus.relay import ensure_events_stream
from bus.subjects import EVENTS_STREAM, EVENTS_SUBJECTS
from domain.envelope import EventEnvelope

log = logging.getLogger(__name__)

KG_POLICY_CONSUMER = "policy-kg_enrichment"
KG_POLICY_SUBJECTS: tuple[str, ...] = (
    "events.source_file.LineageExtracted",
    "events.enrichment_run.KGEnrichmentRequested",
)


class PolicyRunner:
    """Fetches the policy's events in order and hands each batch to `policy.handle`.

    A batch that raises (a bug or a store failure: model failures fail open inside the policy)
    is retried `retries` times with backoff, then logged at ERROR with its positions and
    acknowledged, so one poisoned event cannot stop enrichment for good."""

    def __init__(
        self,
        js: JetStreamContext,
        policy: Any,
        *,
        batch_size: int = 32,
        fetch_timeout_s: float = 1.0,
        retries: int = 3,
        backoff_s: float = 1.0,
    ) -> None:
        self.js = js
        self.policy = policy
        self.batch_size = batch_size
        self.fetch_timeout_s = fetch_timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.failures = 0
        self.last_error: str | None = None
        self.applied = 0
        self._task: asyncio.Task[None] | None = None
        self._sub: Any = None

    @property
    def name(self) -> str:
        return str(self.policy.name)

    def consumer_config(self) -> ConsumerConfig:
        return ConsumerConfig(
            durable_name=KG_POLICY_CONSUMER,
            description="KG enrichment policy: live LineageExtracted and enrichment requests",
            ack_policy=AckPolicy.ALL,
            deliver_policy=DeliverPolicy.NEW,
            ack_wait=3600,
            max_ack_pending=self.batch_size * 4,
            max_deliver=-1,
            filter_subjects=list(KG_POLICY_SUBJECTS),
        )

    async def start(self) -> None:
        await ensure_events_stream(self.js)
        self._sub = await self.js.pull_subscribe(
            EVENTS_SUBJECTS,
            durable=KG_POLICY_CONSUMER,
            stream=EVENTS_STREAM,
            config=self.consumer_config(),
        )
        self._task = asyncio.create_task(self._run(), name="policy-kg_enrichment")

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
                continue
            except asyncio.CancelledError:
                raise
            except Exception as error:  # connection lost: nats-py reconnects; wait and fetch
                log.warning("KG enrichment policy: fetch failed (%s)", error)
                await asyncio.sleep(1.0)
                continue
            if messages:
                await self._handle(messages)

    async def _handle(self, messages: list[Any]) -> None:
        envelopes = [EventEnvelope.from_json(m.data) for m in messages]
        for attempt in range(1, self.retries + 1):
            try:
                await self.policy.handle(envelopes)
                self.applied += len(envelopes)
                self.last_error = None
                break
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self.failures += 1
                self.last_error = f"{type(error).__name__}: {error}"
                log.exception(
                    "KG enrichment policy failed on positions %d-%d (attempt %d of %d)",
                    envelopes[0].position,
                    envelopes[-1].position,
                    attempt,
                    self.retries,
                )
                await asyncio.sleep(self.backoff_s * attempt)
        else:
            log.error(
                "KG enrichment skipped positions %d-%d after %d attempts (%s); "
                "`upstream kg propose` runs them again",
                envelopes[0].position,
                envelopes[-1].position,
                self.retries,
                self.last_error,
            )
        with contextlib.suppress(Exception):
            await messages[-1].ack()
