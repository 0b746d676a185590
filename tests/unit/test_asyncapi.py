"""The documented bus contract matches what the service really publishes."""

from __future__ import annotations

import json

import pytest

from bus.asyncapi import EVENT_SCHEMAS, asyncapi_json, envelope_schema
from commands.models import IngestFile, RecordRepositorySnapshot

pytestmark = pytest.mark.unit


def test_asyncapi_documents_commands_and_events():
    spec = json.loads(asyncapi_json())
    assert spec["asyncapi"].startswith("3.")
    assert "cmd.ingest_file" in spec["channels"]
    assert set(EVENT_SCHEMAS) <= set(spec["channels"])
    assert "IngestFile" in spec["components"]["schemas"]
    for command in ("cmd.model_config.create", "cmd.collection.add_documents"):
        assert spec["operations"][command]["action"] == "receive"
    for schema in ("CreateModelConfig", "SeedModelConfigs", "AddDocuments", "CreateCollection"):
        assert schema in spec["components"]["schemas"]
    assert "events.collection.DocumentsAdded" in spec["channels"]
    assert "events.model_config.ModelConfigUpdated" in spec["channels"]


def test_every_recorded_event_validates_against_its_documented_schema(memory_app):
    memory_app.ingest_file(IngestFile(path="dbt_project.yml", content="name: shop\n"))
    memory_app.ingest_file(IngestFile(path="dbt_project.yml", content="name: shop2\n"))
    memory_app.ingest_file(
        IngestFile(path="m.sql", content="insert into t select a from s", tags=("x",))
    )
    memory_app.ingest_file(IngestFile(path="m.sql", content="insert into t select b from s"))
    for paths in (("dbt_project.yml", "m.sql"), ("dbt_project.yml",)):  # m.sql is deleted
        memory_app.record_repository_snapshot(RecordRepositorySnapshot(source="git@x", paths=paths))
    seen = set()
    for envelope in memory_app.read(0, 100):
        seen.add(envelope.subject)
        payload_model, _ = EVENT_SCHEMAS[envelope.subject]
        model = envelope_schema("E", payload_model)
        parsed = model.model_validate(json.loads(envelope.to_json()))
        assert parsed.model_dump()["payload"] == envelope.payload  # nothing undocumented
    assert seen == set(EVENT_SCHEMAS)  # and every documented event really happens


def test_model_config_events_are_all_documented(memory_app):
    from bus.asyncapi import _OPEN_EVENTS
    from commands.model_config import SeedModelConfigs

    memory_app.seed_model_configs(SeedModelConfigs(profile="local"))
    memory_app.seed_model_configs(SeedModelConfigs(profile="default", force=True))
    subjects = {e.subject for e in memory_app.read(0, 1000)}
    assert subjects <= set(_OPEN_EVENTS)
