"""One KG enrichment run end to end against a real llama.cpp `llama-server` (SmolLM2-135M,
the fixture of test_llama_server.py): the whole embedded service ingests a small project, the
policy asks the tiny model for proposals in strict JSON (a grammar from the JSON schema), and
whatever it proposes is validated, verified and recorded; nothing crashes and the parser's
lineage stays as it was."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import bootstrap
from adapters.memory import HashingEmbedder
from adapters.settings import Settings
from api.app import create_app
from tests.integration import test_llama_server as llama

pytestmark = [pytest.mark.integration, pytest.mark.slow]

llama_server = llama.llama_server  # the module-scoped llama-server fixture (skips without it)

P = "tiny"
FILES = {
    "etl/load_orders.sql": (
        "-- Nightly load of the orders mart.\n"
        "INSERT INTO mart.orders (order_id, amount)\n"
        "SELECT o.id, o.amount FROM raw.orders AS o WHERE o.status = 'paid';\n"
    ),
    "docs/readme.md": "# Tiny project\nThe orders mart is loaded from raw.orders every night.\n",
}


@pytest.fixture
def service(tmp_path, monkeypatch, llama_server: str) -> Iterator[TestClient]:
    monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", llama_server)
    monkeypatch.setenv("KG_MAX_PROPOSALS", "2")  # a short answer: the CPU is shared
    monkeypatch.setenv("LLM_TIMEOUT_DEFAULT", "240")
    settings = Settings(UPSTREAM_DATA_DIR=tmp_path / "data", UPSTREAM_SEED_PROFILE="none")  # type: ignore[call-arg]
    container = bootstrap(settings, "serve", embedder=HashingEmbedder())
    with TestClient(create_app(container=container)) as client:
        yield client


def wait_for_runs(client: TestClient, seconds: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        summary = client.get("/api/v1/kg/summary", params={"project_id": P}).json()
        if summary["runs"] >= 1 and not summary["pending_files"] and not summary["running"]:
            break
        assert time.monotonic() < deadline, summary
        time.sleep(0.5)
    deadline = time.monotonic() + 20
    while True:  # the run's events reach the graph and kg read models
        projections = client.get("/health").json()["components"]["projections"]
        if min(projections[n]["position"] for n in ("graph", "kg")) >= summary["head"]:
            return dict(summary)
        assert time.monotonic() < deadline
        time.sleep(0.1)


def parser_edges(client: TestClient) -> list[dict[str, Any]]:
    reply = client.get(
        "/api/v1/lineage/mart.orders/upstream",
        params={"project_id": P, "include_llm": "none", "hops": 2},
    )
    assert reply.status_code == 200, reply.text
    return list(reply.json()["edges"])


@pytest.mark.spec("LLM-10.2")
@pytest.mark.spec("LLM-10.7")
@pytest.mark.spec("LLM-11.2")
@pytest.mark.spec("LLM-11.3")
@pytest.mark.spec("CFG-12.1")
def test_one_enrichment_run_end_to_end_on_a_real_tiny_model(service):
    config = {
        "usage_type": "kg_edge_creation",
        "priority": 1,
        "model_id": llama._MODEL_ID,
        "provider": "openai_compatible",
        "parameters": {"max_tokens": 384, "temperature": 0.0},
    }
    assert service.post("/api/v1/models/config?wait=true", json=config).status_code == 201
    reply = service.post(
        "/api/v1/ingest?wait=true",
        json={"project_id": P, "files": [{"path": p, "content": c} for p, c in FILES.items()]},
    )
    assert reply.status_code == 200 and reply.json()["changed"] == 2  # at once: no model waited
    before = parser_edges(service)
    assert {e["target"].rsplit(":", 1)[-1] for e in before} == {"raw.orders"}

    summary = wait_for_runs(service)
    (run,) = service.get("/api/v1/kg/runs", params={"project_id": P}).json()["runs"]
    (file,) = run["files"]  # the SQL file; Markdown is not enriched
    assert file["path"] == "etl/load_orders.sql"
    assert run["status"] in ("completed", "failed_open"), run
    if file["outcome"] == "proposed":  # the model answered the JSON asked for
        assert file["model"] == llama._MODEL_ID and run["totals"]["models"] == [llama._MODEL_ID]
    else:  # it did not (e.g. cut at max_tokens): failed open, logged, recorded
        assert file["outcome"] == "failed_open" and file["error"]
    assert summary["proposed"] == file["proposed"] <= 2
    edges = service.get("/api/v1/kg/edges", params={"project_id": P}).json()["edges"]
    assert len(edges) == file["proposed"]
    for edge in edges:  # whatever it proposed: validated, resolved, verified, recorded
        assert edge["status"] == "proposed" and edge["model"] == llama._MODEL_ID
        assert edge["verification"] in ("verified", "contradicted", "unverified")
        assert 0.0 <= edge["confidence"] <= 1.0 and edge["file_path"] == "etl/load_orders.sql"
        events = service.get(f"/api/v1/kg/edges/{edge['edge_id']}/history").json()["events"]
        assert [e["action"] for e in events] == ["proposed", "verified"]
    confidences = [e["confidence"] for e in edges]
    if confidences:
        assert summary["confidence"]["min"] == pytest.approx(min(confidences), abs=1e-4)
        assert summary["confidence"]["max"] == pytest.approx(max(confidences), abs=1e-4)
    dropped = sum(file["dropped"].values())
    assert summary["dropped"] == dropped  # invalid proposals counted, never recorded
    assert parser_edges(service) == before  # the parser's lineage is untouched
