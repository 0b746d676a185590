"""The documented bus contract matches what the service really publishes."""

from __future__ import annotations

import json

import pytest

from bus.asyncapi import EVENT_SCHEMAS, asyncapi_json, envelope_schema
from commands.models import IngestFile

pytestmark = pytest.mark.unit


def test_asyncapi_documents_commands_and_events():
    spec = json.loads(asyncapi_json())
    assert spec["asyncapi"].startswith("3.")
    assert "cmd.ingest_file" in spec["channels"]
    assert set(EVENT_SCHEMAS) <= set(spec["channels"])
    assert "IngestFile" in spec["components"]["schemas"]


def test_every_recorded_event_validates_against_its_documented_schema(memory_app):
    memory_app.ingest_file(IngestFile(path="a.sql", content="select 1", tags=("x",)))
    for envelope in memory_app.read(0, 10):
        payload_model, _ = EVENT_SCHEMAS[envelope.subject]
        model = envelope_schema("E", payload_model)
        parsed = model.model_validate(json.loads(envelope.to_json()))
        assert parsed.model_dump()["payload"] == envelope.payload  # nothing undocumented
