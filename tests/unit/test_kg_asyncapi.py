"""Every KG enrichment event the service records matches its documented AsyncAPI schema."""

from __future__ import annotations

import json

import pytest

from bus.asyncapi import asyncapi_json, envelope_schema
from bus.kg_asyncapi import KG_EVENT_SCHEMAS
from commands.kg import AcceptLineageEdge, ProposeKGEdges, RejectLineageEdge
from tests.unit.test_kg_enrichment import LOAD, LOAD_ANSWER, LOAD_SQL, FakeProvider, World, answer

pytestmark = pytest.mark.unit


def test_the_kg_commands_and_events_are_in_the_bus_contract():
    spec = json.loads(asyncapi_json())
    for channel in ("cmd.kg.propose_edges", "cmd.kg.accept_edge", "cmd.kg.reject_edge"):
        assert spec["operations"][channel]["action"] == "receive"
    assert set(KG_EVENT_SCHEMAS) <= set(spec["channels"])
    for schema in ("ProposeKGEdges", "AcceptLineageEdge", "RejectLineageEdge"):
        assert schema in spec["components"]["schemas"]


async def test_every_recorded_kg_event_validates_against_its_documented_schema():
    world = World(FakeProvider(kg_model=[LOAD_ANSWER, answer()]))
    world.configure()
    world.ingest(LOAD, LOAD_SQL)
    await world.live()
    first, _ = world.llm_edges()
    world.app.accept_lineage_edge(AcceptLineageEdge(edge_id=first.edge_id, actor="ana"))
    world.app.reject_lineage_edge(RejectLineageEdge(edge_id=first.edge_id, actor="bo"))
    world.ingest(LOAD, LOAD_SQL + "-- changed\n")  # the model proposes nothing: retracted
    world.app.propose_kg_edges(ProposeKGEdges(project_id="shop"))
    await world.live()
    seen = set()
    for envelope in world.app.read(0, 10_000):
        if envelope.aggregate not in ("proposed_edge", "enrichment_run"):
            continue
        seen.add(envelope.subject)
        payload_model, _ = KG_EVENT_SCHEMAS[envelope.subject]
        parsed = envelope_schema("E", payload_model).model_validate(json.loads(envelope.to_json()))
        assert parsed.model_dump()["payload"] == envelope.payload  # nothing undocumented
    assert seen == set(KG_EVENT_SCHEMAS)  # and every documented event really happens
