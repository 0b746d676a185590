"""KG enrichment through the whole embedded service (NATS, event store, relay, projections, the
policy on its own consumer, HTTP API) against a scripted OpenAI-compatible HTTP server on
127.0.0.1: valid proposals become events and edges; malformed JSON, 429 and 503 leave the
parser's graph as it was and the ingest successful."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import bootstrap
from adapters.memory import HashingEmbedder
from adapters.settings import Settings
from api.app import create_app
from tests.integration.test_llm_providers import Reply, ScriptedServer, chat_ok

pytestmark = pytest.mark.integration

P = "shop"
LOAD = "etl/load_orders.sql"
LOAD_SQL = "-- nightly load\nINSERT INTO mart.orders\nSELECT id, amount FROM raw.orders;\n"
PROPOSALS = {
    "proposals": [
        {
            "source_node": "mart.orders",
            "target_node": "raw.orders",
            "relationship_type": "READS",
            "confidence": 0.9,
            "reasoning": "INSERT ... SELECT FROM raw.orders",
        },
        {
            "source_node": "mart.orders",
            "target_node": "raw.order_lines",  # named nowhere in the code or the graph
            "relationship_type": "READS",
            "confidence": 0.5,
            "reasoning": "a guess",
        },
    ]
}


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@contextmanager
def running_service(data_dir: Path) -> Iterator[TestClient]:
    settings = Settings(UPSTREAM_DATA_DIR=data_dir, UPSTREAM_SEED_PROFILE="none")  # type: ignore[call-arg]
    container = bootstrap(settings, "serve", embedder=HashingEmbedder())
    with TestClient(create_app(container=container)) as client:
        client.container = container  # type: ignore[attr-defined]
        yield client


@pytest.fixture
def environment(monkeypatch, scripted) -> None:
    monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", scripted.url)
    for name in ("LLM_BASE_DELAY", "LLM_RATE_LIMIT_COOLDOWN", "LLM_UNAVAILABLE_COOLDOWN"):
        monkeypatch.setenv(name, "0")
    monkeypatch.setenv("KG_BREAKER_FAILURES", "10")


@pytest.fixture
def service(tmp_path, environment) -> Iterator[TestClient]:
    with running_service(tmp_path / "data") as client:
        yield client


def configure_kg_model(client: TestClient) -> None:
    body = {
        "usage_type": "kg_edge_creation",
        "priority": 1,
        "model_id": "kg-model",
        "provider": "openai_compatible",
        "parameters": {"max_tokens": 512, "temperature": 0.0},
    }
    reply = client.post("/api/v1/models/config?wait=true", json=body)
    assert reply.status_code == 201, reply.text


def ingest(client: TestClient, path: str, content: str, project: str = P) -> dict[str, Any]:
    reply = client.post(
        "/api/v1/ingest?wait=true",
        json={"project_id": project, "files": [{"path": path, "content": content}]},
    )
    assert reply.status_code == 200, reply.text  # the ingest never waits for, nor fails on, a model
    body: dict[str, Any] = reply.json()
    return body


def runs_done(client: TestClient, project: str, count: int = 1) -> dict[str, Any]:
    """Wait for the policy's runs (asynchronous), then for the read models to apply them."""
    deadline = time.monotonic() + 30
    while True:
        summary = client.get("/api/v1/kg/summary", params={"project_id": project}).json()
        if summary["runs"] >= count and not summary["pending_files"]:
            break
        assert time.monotonic() < deadline, summary
        time.sleep(0.1)
    head = summary["head"]  # the run's events are recorded: let the read models apply them
    deadline = time.monotonic() + 10
    while min(caught_up(client).values()) < head:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return dict(summary)


def caught_up(client: TestClient) -> dict[str, int]:
    projections = client.get("/health").json()["components"]["projections"]
    return {name: p["position"] for name, p in projections.items() if name in ("graph", "kg")}


def upstream(client: TestClient, name: str, mode: str, project: str = P) -> dict[str, Any]:
    reply = client.get(
        f"/api/v1/lineage/{name}/upstream",
        params={"project_id": project, "hops": 2, "include_llm": mode},
    )
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


@pytest.mark.spec("CFG-12.1")
@pytest.mark.spec("LLM-10.2")
@pytest.mark.spec("LLM-11.2")
@pytest.mark.spec("LLM-11.3")
def test_valid_proposals_become_events_and_edges_and_can_be_reviewed(service, scripted):
    refused = service.post("/api/v1/kg/propose", json={"project_id": P})
    assert refused.status_code == 503
    assert refused.json()["message"] == "KG edge creation model not configured"

    configure_kg_model(service)
    scripted.on("kg-model", chat_ok(json.dumps(PROPOSALS), model="kg-model"))
    ingest(service, LOAD, LOAD_SQL)
    summary = runs_done(service, P)
    assert (summary["proposed"], summary["accepted"], summary["dropped"]) == (1, 0, 1)
    assert summary["models_used"] == ["kg-model"]
    assert summary["confidence"] == {"min": 0.9, "median": 0.9, "max": 0.9}

    (request,) = [r for r in scripted.requests if r["key"] == "kg-model"]
    assert request["path"].endswith("/chat/completions")
    assert request["body"]["response_format"]["type"] == "json_schema"  # strict JSON
    assert "INSERT INTO mart.orders" in request["body"]["messages"][1]["content"]

    (edge,) = service.get("/api/v1/kg/edges", params={"project_id": P}).json()["edges"]
    assert (edge["status"], edge["verification"], edge["model"]) == (
        "proposed",
        "verified",
        "kg-model",
    )
    assert (edge["file_path"], edge["confidence"]) == (LOAD, 0.9)
    default = upstream(service, "mart.orders", "accepted")
    assert all(e["provenance"] == "parser" for e in default["edges"])
    proposed = upstream(service, "mart.orders", "proposed")
    (llm,) = [e for e in proposed["edges"] if e["provenance"] == "llm"]
    assert llm["evidence"]["source"] == "llm" and llm["evidence"]["model"] == "kg-model"
    assert llm["evidence"]["status"] == "proposed" and llm["properties"]["verification"]

    accepted = service.post(
        f"/api/v1/kg/edges/{edge['edge_id']}/accept?wait=true",
        json={"reason": "matches the SQL"},
        headers={"X-Actor": "ana@example.com"},
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["edge"]["status"] == "accepted"
    after = upstream(service, "mart.orders", "accepted")
    assert edge["edge_id"] in {e["edge_id"] for e in after["edges"]}
    history = service.get(f"/api/v1/kg/edges/{edge['edge_id']}/history").json()
    assert [(e["action"], e["actor"]) for e in history["events"]] == [
        ("proposed", "kg-enrichment"),
        ("verified", "parser"),
        ("accepted", "ana@example.com"),
    ]
    assert service.get("/api/v1/kg/edges/nope/history").status_code == 404
    bad = service.get("/api/v1/lineage/mart.orders/upstream", params={"include_llm": "maybe"})
    assert bad.status_code == 400 and "none, accepted or proposed" in bad.json()["message"]


@pytest.mark.spec("LLM-10.3")
@pytest.mark.spec("LLM-10.5")
@pytest.mark.spec("LLM-10.6")
def test_malformed_json_429_and_503_leave_the_parser_graph_and_the_ingest_alone(service, scripted):
    configure_kg_model(service)
    faults = {
        "malformed": chat_ok("Sure! The lineage is: mart.orders <- raw.orders", model="kg-model"),
        "rate_limited": Reply(429, b'{"error": {"message": "slow down"}}', {"Retry-After": "0"}),
        "unavailable": Reply(503, b'{"error": {"message": "overloaded"}}'),
    }
    for project, reply in faults.items():
        scripted.on("kg-model", reply)
        calls = scripted.calls("kg-model")
        ingested = ingest(service, LOAD, LOAD_SQL, project=project)
        assert ingested["changed"] == 1 and ingested["refused"] == 0
        summary = runs_done(service, project)
        assert scripted.calls("kg-model") == calls + 1  # asked once, failed, nothing retried
        assert (summary["failed"], summary["proposed"]) == (1, 0)
        assert summary["errors"], summary
        assert service.get("/api/v1/kg/edges", params={"project_id": project}).json()["edges"] == []
        every = upstream(service, "mart.orders", "proposed", project=project)
        parser = upstream(service, "mart.orders", "none", project=project)
        assert every == {**parser, "include_llm": "proposed"}  # only the parser's lineage
        assert {n["name"] for n in parser["nodes"]} == {"raw.orders"}
        (run,) = service.get("/api/v1/kg/runs", params={"project_id": project}).json()["runs"]
        assert run["status"] == "failed_open" and run["files"][0]["outcome"] == "failed_open"


@pytest.mark.spec("LLM-11.2")
def test_replay_and_restart_rebuild_the_same_graph_without_calling_a_model(
    environment, scripted, tmp_path
):
    both = {
        "proposals": [*PROPOSALS["proposals"], {**PROPOSALS["proposals"][0], "source_node": LOAD}]
    }
    scripted.on("kg-model", chat_ok(json.dumps(both), model="kg-model"))
    with running_service(tmp_path / "data") as service:
        configure_kg_model(service)
        ingest(service, LOAD, LOAD_SQL)
        runs_done(service, P)
        first, second = service.get("/api/v1/kg/edges", params={"project_id": P}).json()["edges"]
        for edge, decision in ((first, "accept"), (second, "reject")):
            reply = service.post(f"/api/v1/kg/edges/{edge['edge_id']}/{decision}?wait=true")
            assert reply.status_code == 200, reply.text
        graph = service.container.graph  # type: ignore[attr-defined]
        live = graph.dump()
        assert [e.properties["status"] for e in live[1] if e.provenance == "llm"] == ["accepted"]
        calls = scripted.calls("kg-model")

        replayed = service.post("/api/v1/replay", json={})
        assert replayed.status_code == 200, replayed.text
        assert graph.dump() == live  # the same graph, LLM edges included
        assert scripted.calls("kg-model") == calls  # and no model was called

    with running_service(tmp_path / "data") as again:  # a restart on the same data dir
        time.sleep(1.5)  # the policy's consumer resumes where it acknowledged: nothing to do
        assert again.container.graph.dump() == live  # type: ignore[attr-defined]
        assert again.get("/api/v1/kg/runs", params={"project_id": P}).json()["count"] == 1
    assert scripted.calls("kg-model") == calls
