"""The whole chat pipeline against a real model: llama.cpp's `llama-server` with SmolLM2-135M
(installed by `make setup-test`), configured as an `openai_compatible` chain. Whatever the tiny
model writes, the response keeps the contract, streams, and every citation resolves to evidence
that was retrieved."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import bootstrap
from adapters.memory import HashingEmbedder
from adapters.settings import Settings
from api.app import create_app
from commands.sources.local import LocalFile, walk
from tests.integration import test_llama_server as llama

pytestmark = [pytest.mark.integration, pytest.mark.slow]

llama_server = llama.llama_server  # the module-scoped llama-server fixture (fails in CI without it)
_MODEL_ID = llama._MODEL_ID

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "shop"
CONTRACT_KEYS = {"answer", "evidence", "next_actions", "warnings", "model", "metadata"}


@pytest.fixture(scope="module")
def service(llama_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    patch = pytest.MonkeyPatch()
    patch.setenv("OPENAI_COMPATIBLE_BASE_URL", llama_server)
    for endpoint in ("DEEP", "GRAPH", "DEFAULT"):  # a loaded 2-core CI machine is slow
        patch.setenv(f"LLM_TIMEOUT_{endpoint}", "600")
    data = tmp_path_factory.mktemp("chat-llama")
    settings = Settings(  # type: ignore[call-arg]
        UPSTREAM_DATA_DIR=data, UPSTREAM_SEED_PROFILE="none", RAG_MAX_RESPONSE_TOKENS=200
    )
    container = bootstrap(settings, "serve", embedder=HashingEmbedder())
    files = [f for f in walk(EXAMPLE, 1_000_000) if isinstance(f, LocalFile)]
    try:
        with TestClient(create_app(container=container)) as client:
            for usage in ("chat_graph", "chat_deep"):
                reply = client.post(
                    "/api/v1/models/config?wait=true",
                    json={
                        "usage_type": usage,
                        "provider": "openai_compatible",
                        "model_id": _MODEL_ID,
                        "priority": 1,
                        "parameters": {"temperature": 0.0, "max_tokens": 200},
                    },
                )
                assert reply.status_code in (200, 201), reply.text
            body = {
                "project_id": "shop",
                "files": [{"path": f.path, "content": f.content} for f in files],
            }
            reply = client.post("/api/v1/ingest?wait=true", json=body)
            assert reply.status_code == 200, reply.text
            yield client
    finally:
        patch.undo()


def _resolves(body: dict) -> None:
    assert set(body) == CONTRACT_KEYS
    assert isinstance(body["answer"], str) and body["answer"]
    evidence = {e["id"] for e in body["evidence"]}
    assert all(e["id"].startswith("urn:li:") for e in body["evidence"])
    for citation in body["metadata"]["citations"]:
        assert citation["urn"] in evidence or citation["urn"].startswith("urn:li:")
    assert body["metadata"]["action"] in ("CITE", "ROUTE")


@pytest.mark.spec("LLM-15.1", "LLM-16.2", "RAG-23")
def test_graph_question_answered_by_the_real_model(service):
    reply = service.post(
        "/api/chat/graph", json={"query": "What feeds customer_summary?", "project_id": "shop"}
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    _resolves(body)
    assert body["model"] == _MODEL_ID
    assert body["metadata"]["provider"] == "openai_compatible"


@pytest.mark.spec("LLM-33.1", "LLM-33.2")
def test_the_real_model_streams_and_the_final_event_keeps_the_contract(service):
    question = {"query": "Which models read from orders?", "project_id": "shop", "top_k": 3}
    with service.stream("POST", "/api/chat/deep/stream", json=question) as reply:
        assert reply.status_code == 200
        events = []
        event = "message"
        for line in reply.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                events.append((event, json.loads(line[5:].lstrip())))
    finals = [data for event, data in events if event == "final"]
    assert len(finals) == 1, events[-3:]
    _resolves(finals[0])
    assert finals[0]["model"] == _MODEL_ID
