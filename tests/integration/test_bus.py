"""The relay and the projection runtime against a real nats-server with JetStream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import nats
import pytest

from bus.projection_runner import ProjectionRunner
from bus.relay import Relay
from bus.subjects import EVENTS_STREAM
from commands.application import UpstreamApplication
from commands.models import IngestFile
from domain.envelope import EventEnvelope
from projections.vectors import VectorsProjection

pytestmark = pytest.mark.integration


class RecordingProjection:
    """Records what it applies; can be told to fail a number of times first."""

    name = "recording"

    def __init__(self, failures: int = 0) -> None:
        self.applied: list[int] = []
        self.failures_left = failures
        self.attempts = 0

    def position(self) -> int:
        return self.applied[-1] if self.applied else 0

    def process(self, envelopes: Sequence[EventEnvelope]) -> None:
        self.attempts += 1
        if self.failures_left:
            self.failures_left -= 1
            raise RuntimeError("read model unavailable")
        self.applied.extend(e.position for e in envelopes if e.position > self.position())

    def reset(self) -> None:
        self.applied.clear()


def _ingest(app: UpstreamApplication, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        app.ingest_file(IngestFile(path=f"f{i}.sql", content=f"select {i} from t{i}"))


async def _eventually(predicate, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def _stream_messages(js) -> int:
    return (await js.stream_info(EVENTS_STREAM)).state.messages


async def test_relay_publishes_every_event_in_order_with_message_ids(nats_server, sqlite_app):
    _ingest(sqlite_app, 10)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    relay = Relay(sqlite_app, js)
    await relay.start()
    head = sqlite_app.max_position()
    await _eventually(lambda: relay.position == head)
    await relay.stop()

    sub = await js.pull_subscribe("events.>", durable="check", stream=EVENTS_STREAM)
    messages = await sub.fetch(head, timeout=5)
    assert [EventEnvelope.from_json(m.data).position for m in messages] == list(range(1, head + 1))
    assert messages[0].headers["Nats-Msg-Id"] == "upstream:1"
    assert messages[2].subject == "events.source_file.FileChunked"
    await nc.close()


async def test_republishing_after_a_crash_is_deduplicated(nats_server, sqlite_app):
    """A relay that died after publishing but before saving its position publishes again."""
    _ingest(sqlite_app, 5)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    relay = Relay(sqlite_app, js)
    await relay.start()
    head = sqlite_app.max_position()
    await _eventually(lambda: relay.position == head)
    await relay.stop()
    kv = await js.key_value("upstream_relay")
    await kv.put("position", b"0")  # as if the save never happened

    again = Relay(sqlite_app, js)
    await again.start()
    await _eventually(lambda: again.position == head)
    await again.stop()

    assert again.duplicates == head
    assert await _stream_messages(js) == head
    await nc.close()


async def test_relay_resumes_after_its_saved_position(nats_server, sqlite_app):
    _ingest(sqlite_app, 3)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    first = Relay(sqlite_app, js)
    await first.start()
    first_head = sqlite_app.max_position()
    await _eventually(lambda: first.position == first_head)
    await first.stop()
    _ingest(sqlite_app, 2, start=3)
    head = sqlite_app.max_position()

    second = Relay(sqlite_app, js)
    await second.start()
    await _eventually(lambda: second.position == head)
    await second.stop()

    assert second.published == head - first_head and second.duplicates == 0
    assert await _stream_messages(js) == head
    await nc.close()


async def test_projection_applies_in_order_and_ignores_duplicate_deliveries(
    nats_server, sqlite_app
):
    _ingest(sqlite_app, 20)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    relay = Relay(sqlite_app, js)
    await relay.start()
    projection = RecordingProjection()
    runner = ProjectionRunner(js, projection, asyncio.Lock(), batch_size=7)
    await runner.start()
    head = sqlite_app.max_position()
    await _eventually(lambda: projection.position() == head)

    # Deliver already-applied events again, under new message ids (past the dedupe window).
    for envelope in sqlite_app.read(0, 10):
        await js.publish(envelope.subject, envelope.to_json(), headers={"Nats-Msg-Id": "x"})
    await asyncio.sleep(1.0)
    await runner.stop()
    await relay.stop()

    assert projection.applied == list(range(1, head + 1))
    await nc.close()


async def test_a_failing_projection_retries_the_same_events_and_never_skips(
    nats_server, sqlite_app
):
    _ingest(sqlite_app, 5)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    relay = Relay(sqlite_app, js)
    await relay.start()
    projection = RecordingProjection(failures=3)
    runner = ProjectionRunner(js, projection, asyncio.Lock(), batch_size=100, max_backoff_s=0.5)
    await runner.start()
    head = sqlite_app.max_position()
    await _eventually(lambda: projection.position() == head)
    await runner.stop()
    await relay.stop()

    assert runner.failures == 3
    assert projection.applied == list(range(1, head + 1))
    assert runner.last_error is None
    await nc.close()


async def test_relay_and_projection_survive_a_nats_restart(nats_server, sqlite_app):
    nc = await nats.connect(nats_server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    js = nc.jetstream()
    relay = Relay(sqlite_app, js)
    await relay.start()
    projection = RecordingProjection()
    runner = ProjectionRunner(js, projection, asyncio.Lock(), batch_size=50)
    await runner.start()
    _ingest(sqlite_app, 3)
    relay.wake()
    await _eventually(lambda: projection.position() == sqlite_app.max_position())

    port = nats_server.port
    nats_server.stop()
    _ingest(sqlite_app, 3, start=3)  # written while the bus is down
    await asyncio.sleep(1.0)
    nats_server.start(port=port)

    head = sqlite_app.max_position()
    await _eventually(lambda: projection.position() == head, within=60)
    assert projection.applied == list(range(1, head + 1))
    await runner.stop()
    await relay.stop()
    await nc.close()


async def test_vectors_projection_end_to_end_over_jetstream(
    nats_server, sqlite_app, embedder, memory_index
):
    projection = VectorsProjection(embedder, memory_index)
    projection.start()
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    relay = Relay(sqlite_app, js)
    await relay.start()
    runner = ProjectionRunner(js, projection, asyncio.Lock())
    await runner.start()
    _ingest(sqlite_app, 12)
    relay.wake()
    await _eventually(lambda: projection.position() == sqlite_app.max_position())
    await runner.stop()
    await relay.stop()

    assert memory_index.count() == 12
    assert memory_index.checkpoint("vectors") == sqlite_app.max_position()
    await nc.close()
