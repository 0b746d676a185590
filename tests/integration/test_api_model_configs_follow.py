"""Each `upstream api` replica keeps its own DuckDB model_configs: it catches up from the event
store, then follows the configuration events on a JetStream consumer of its own (named after
the process, removed when the process goes), against a real nats-server."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import DeliverPolicy

from adapters.duckdb_model_configs import DuckDBModelConfigs
from bus.process_projection_runner import (
    MODEL_CONFIG_SUBJECTS,
    ProcessProjectionRunner,
    process_consumer_name,
)
from bus.relay import Relay
from bus.subjects import EVENTS_STREAM
from commands.model_config import CreateModelConfig, SeedModelConfigs, UpdateModelConfig
from commands.models import IngestFile
from projections.model_configs import ModelConfigsProjection
from projections.rebuild import catch_up

pytestmark = pytest.mark.integration


async def _eventually(predicate: Any, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def test_consumer_names_are_per_process_and_valid() -> None:
    name = process_consumer_name("model_configs", "api-7f9c.example.svc", 4242)
    assert name == "projection-model_configs-api-7f9c_example_svc-4242"
    assert process_consumer_name("model_configs", "h", 1) != process_consumer_name(
        "model_configs", "h", 2
    )
    assert process_consumer_name("model_configs").startswith("projection-model_configs-")


async def test_two_api_replicas_each_catch_up_and_follow_config_events(
    nats_server, sqlite_app, tmp_path: Path
) -> None:
    # configurations written before the replicas start (and an ingest they do not need)
    sqlite_app.seed_model_configs(SeedModelConfigs(profile="local"))
    sqlite_app.ingest_file(IngestFile(path="a.sql", content="select 1 from t"))
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    relay = Relay(sqlite_app, js)
    await relay.start()
    await _eventually(lambda: relay.position == sqlite_app.max_position())

    replicas: list[tuple[DuckDBModelConfigs, ProcessProjectionRunner]] = []
    try:
        for pid in (101, 102):
            store = DuckDBModelConfigs(tmp_path / f"api-{pid}.duckdb")
            projection = ModelConfigsProjection(store)
            projection.start()
            runner = ProcessProjectionRunner(
                js,
                projection,
                asyncio.Lock(),
                subjects=MODEL_CONFIG_SUBJECTS,
                consumer=process_consumer_name("model_configs", "api-host", pid),
                inactive_threshold_s=30,
            )
            applied = await runner.follow(lambda p=projection: catch_up(p, sqlite_app))
            assert applied > 0 and store.count() == 5  # the local profile, offline: 5 chat rows
            replicas.append((store, runner))

        # each replica has a consumer of its own: new messages, config subjects only,
        # removed by the server once the process is gone
        names = [runner.durable for _, runner in replicas]
        assert names == [
            "projection-model_configs-api-host-101",
            "projection-model_configs-api-host-102",
        ]
        for name in names:
            info = await js.consumer_info(EVENTS_STREAM, name)
            assert info.config.deliver_policy == DeliverPolicy.NEW
            assert info.config.filter_subjects == list(MODEL_CONFIG_SUBJECTS)
            assert info.config.inactive_threshold == pytest.approx(30)

        # a configuration written now reaches both replicas through the bus
        created = sqlite_app.create_model_config(
            CreateModelConfig(
                usage_type="inference", priority=1, model_id="qwen2.5", provider="openai_compatible"
            )
        )
        config_id = created.aggregate_id
        sqlite_app.ingest_file(IngestFile(path="b.sql", content="select 2 from t"))
        sqlite_app.update_model_config(UpdateModelConfig(config_id=config_id, enabled=False))
        relay.wake()
        for store, _ in replicas:
            await _eventually(lambda s=store: (s.get(config_id) or {}).get("enabled") is False)
            assert store.count() == 6
        # only configuration events were delivered (not the ingests), each once: created,
        # its registry slot claimed, updated
        for _, runner in replicas:
            await _eventually(lambda r=runner: r.applied >= 3)
            await asyncio.sleep(0.2)
            assert runner.applied == 3
    finally:
        for store, runner in replicas:
            await runner.stop()
            store.close()
        await relay.stop()

    # a clean stop deletes the consumers
    remaining = [c.name async for c in _consumers(js)]
    assert not any(name.startswith("projection-model_configs-api-host") for name in remaining)
    await nc.close()


async def _consumers(js: Any) -> Any:
    for info in await js.consumers_info(EVENTS_STREAM):
        yield info


async def test_the_api_role_catches_up_and_follows_its_model_configs(
    nats_server, sqlite_app, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from adapters.bootstrap import bootstrap
    from adapters.memory import HashingEmbedder, InMemoryVectorIndex
    from adapters.settings import Settings

    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:9")  # nothing there: degraded
    sqlite_app.seed_model_configs(SeedModelConfigs(profile="local"))
    nc = await nats.connect(nats_server.url)
    relay = Relay(sqlite_app, nc.jetstream())
    await relay.start()
    settings = Settings(  # type: ignore[call-arg]
        UPSTREAM_DATA_DIR=tmp_path / "api", NATS_URL=nats_server.url
    )
    container = bootstrap(
        settings, "api", embedder=HashingEmbedder(), index=InMemoryVectorIndex(), app=sqlite_app
    )
    await container.start()
    try:
        # caught up from the event store at start
        assert container.model_configs.count() == 5
        runner = container.runners["model_configs"]
        assert runner.durable.startswith("projection-model_configs-")
        assert runner.durable.endswith(f"-{os.getpid()}")
        # and kept current by its own consumer
        sqlite_app.create_model_config(
            CreateModelConfig(usage_type="inference", priority=1, model_id="m", provider="ollama")
        )
        relay.wake()
        await _eventually(lambda: container.model_configs.count() == 6)
        position = sqlite_app.max_position()
        await _eventually(lambda: container.read_model_position("model_configs") >= position)
    finally:
        await relay.stop()
        await container.stop()
        await nc.close()
