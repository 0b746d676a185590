"""The production event store: eventsourcing on the machine's PostgreSQL."""

from __future__ import annotations

import asyncio

import nats
import pytest

from bus.relay import Relay
from commands.application import UpstreamApplication
from commands.models import IngestFile
from projections.rebuild import catch_up
from projections.vectors import VectorsProjection

pytestmark = pytest.mark.integration


@pytest.fixture
def pg_app(postgres_schema):
    app = UpstreamApplication(env=postgres_schema)
    yield app
    app.close()


def test_ingest_records_events_in_postgres_and_skips_unchanged(pg_app, postgres_schema):
    first = pg_app.ingest_file(IngestFile(path="a.sql", content="select 1", project_id="p"))
    again = pg_app.ingest_file(IngestFile(path="a.sql", content="select 1", project_id="p"))

    assert first.changed and not again.changed
    assert [e.event_type for e in pg_app.read(0, 10)] == [
        "Registered",
        "FileIngested",
        "FileChunked",
        "LineageExtracted",
    ]

    reopened = UpstreamApplication(env=postgres_schema)  # another process, same store
    assert reopened.max_position() == first.position
    assert not reopened.ingest_file(
        IngestFile(path="a.sql", content="select 1", project_id="p")
    ).changed
    reopened.close()


def test_concurrent_writers_to_one_file_never_lose_a_version(postgres_schema):
    apps = [UpstreamApplication(env=postgres_schema) for _ in range(2)]
    for n in range(5):
        for i, app in enumerate(apps):
            app.ingest_file(IngestFile(path="shared.sql", content=f"select {n}, {i}"))
    versions = [e for e in apps[0].read(0, 100) if e.event_type == "FileIngested"]
    assert len(versions) == 10
    for app in apps:
        app.close()


async def test_relay_and_projection_from_postgres(pg_app, nats_server, embedder, memory_index):
    for i in range(4):
        pg_app.ingest_file(IngestFile(path=f"m{i}.sql", content=f"select {i}"))
    nc = await nats.connect(nats_server.url)
    relay = Relay(pg_app, nc.jetstream())
    await relay.start()
    for _ in range(200):
        if relay.position == pg_app.max_position():
            break
        await asyncio.sleep(0.02)
    await relay.stop()
    await nc.close()

    projection = VectorsProjection(embedder, memory_index)
    projection.start()
    catch_up(projection, pg_app)
    assert relay.position == pg_app.max_position() == 16
    assert memory_index.count() == 4
