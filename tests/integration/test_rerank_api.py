"""Cross-encoder reranking through the HTTP API of the whole service (rag-providers.md,
PRV-10 to PRV-13): a real sentence-transformers CrossEncoder built offline from the packaged
MiniLM weights (`tests/cross_encoder_model.py`), loaded by `upstream serve`'s own start-up from
a folder, from the Hugging Face cache by name, or not at all."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from fastapi.testclient import TestClient
from sentence_transformers import CrossEncoder

from adapters.bootstrap import bootstrap
from adapters.memory import HashingEmbedder
from adapters.settings import Settings
from api.app import create_app
from api.cli import with_cross_encoder_flags
from bus.nats_server import free_port
from domain.rerank import CROSS_ENCODER_NOT_LOADED, EXAMPLE_MODEL
from tests.cross_encoder_model import build_cross_encoder, install_in_hub_cache

pytestmark = pytest.mark.integration

HUB_NAME = "local-test/tiny-reranker"
QUERY = "which model computes net revenue for each order?"
TEXTS = [
    "net_revenue is payments minus refunds, computed in fct_orders",
    "the weather in Lisbon is mild in spring",
    "stg_orders renames the raw order columns",
    "customer_summary sums net revenue per customer",
    "a recipe for lemon cake with three eggs",
    "refunds are joined to payments by order_id",
    "select order_id, sum(amount) as net_revenue from payments group by 1",
    "the finance team exports customer_ltv every night",
    "dbt tests check that order ids are unique",
    "Kubernetes runs two API replicas",
]


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


@contextlib.contextmanager
def running(settings: Settings) -> Iterator[tuple[TestClient, Any, list[str]]]:
    """The whole service on `settings` (the cross-encoder as its start-up loads it)."""
    captured = Captured()
    logging.getLogger().addHandler(captured)
    previous = logging.getLogger().level
    logging.getLogger().setLevel(logging.INFO)
    try:
        container = bootstrap(settings, "serve", embedder=HashingEmbedder())
        with TestClient(create_app(container=container)) as client:
            yield client, container, captured.lines
    finally:
        logging.getLogger().removeHandler(captured)
        logging.getLogger().setLevel(previous)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_cross_encoder(tmp_path_factory.mktemp("models") / "tiny-reranker")


@pytest.fixture(scope="module")
def reference(model_dir: Path) -> CrossEncoder:
    """The same folder loaded independently: the scores the endpoint must return."""
    return CrossEncoder(str(model_dir), device="cpu")


@pytest.fixture(scope="module")
def with_model(
    model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, Any, list[str]]]:
    """`upstream serve --cross-encoder-path DIR` with CROSS_ENCODER_MODEL set to a model that
    does not exist: the flag must win."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CROSS_ENCODER_MODEL", "no-such-org/no-such-reranker")
        settings = Settings(UPSTREAM_DATA_DIR=tmp_path_factory.mktemp("served") / "data")
    settings = with_cross_encoder_flags(settings, str(model_dir), None)
    with running(settings) as service:
        yield service


@pytest.fixture(scope="module")
def without_model(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[TestClient, Any, list[str]]]:
    settings = Settings(UPSTREAM_DATA_DIR=tmp_path_factory.mktemp("plain") / "data")
    with running(settings) as service:
        yield service


def _documents(n: int = len(TEXTS)) -> list[dict[str, Any]]:
    return [{"id": f"doc-{i}", "text": t} for i, t in enumerate(TEXTS[:n])]


def _expected_order(reference: CrossEncoder, texts: list[str]) -> list[tuple[int, float]]:
    scores = reference.predict([(QUERY, t) for t in texts]).tolist()
    return sorted(((i + 1, float(s)) for i, s in enumerate(scores)), key=lambda p: -p[1])


# -- loading --------------------------------------------------------------------------------
@pytest.mark.spec("PRV-11.2", "PRV-11.4", "PRV-12.1")
def test_a_local_folder_is_loaded_at_start_up_and_health_reports_it(with_model, model_dir):
    client, container, logs = with_model
    assert any(f"cross-encoder loaded from local path {model_dir}" in line for line in logs)
    assert "cross-encoder" in [s.name for s in container.startup]
    health = client.get("/health").json()
    assert health["cross_encoder"] == {"model": str(model_dir), "status": "loaded"}
    assert health["status"] in ("ok", "degraded") and "components" in health
    reply = client.post("/rerank", json={"query": QUERY, "documents": _documents(2)})
    assert reply.status_code == 200  # ready for /rerank requests
    models = client.get("/api/v1/reranker-models").json()
    assert models["loaded"] == str(model_dir)


@pytest.mark.spec("PRV-11.1", "PRV-11.4")
def test_a_hugging_face_name_is_loaded_through_the_hub_cache(tmp_path, model_dir, reference):
    """The flag's name goes through the Hugging Face Hub client and its cache (where a
    download leaves a model; nothing can be downloaded here, so the test puts it there). The
    name flag wins over a CROSS_ENCODER_PATH in the environment."""
    cache = install_in_hub_cache(model_dir, tmp_path / "hub", HUB_NAME)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CROSS_ENCODER_PATH", str(tmp_path / "missing-folder"))
        settings = Settings(UPSTREAM_DATA_DIR=tmp_path / "data", CROSS_ENCODER_CACHE_DIR=cache)
    settings = with_cross_encoder_flags(settings, None, HUB_NAME)
    with running(settings) as (client, _, logs):
        assert any(f"cross-encoder loaded from model {HUB_NAME}" in line for line in logs)
        assert client.get("/health").json()["cross_encoder"] == {
            "model": HUB_NAME,
            "status": "loaded",
        }
        reply = client.post("/rerank", json={"query": QUERY, "documents": _documents(3)})
        expected = _expected_order(reference, TEXTS[:3])
        assert [r["original_rank"] for r in reply.json()["reranked"]] == [i for i, _ in expected]


@pytest.mark.spec("PRV-11.3")
def test_cross_encoder_model_in_the_environment_behaves_like_the_flag(tmp_path, model_dir):
    cache = install_in_hub_cache(model_dir, tmp_path / "hub", HUB_NAME)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CROSS_ENCODER_MODEL", HUB_NAME)
        env.delenv("CROSS_ENCODER_PATH", raising=False)
        settings = Settings(UPSTREAM_DATA_DIR=tmp_path / "data", CROSS_ENCODER_CACHE_DIR=cache)
    settings = with_cross_encoder_flags(settings, None, None)  # no flags
    with running(settings) as (client, _, logs):
        assert any(f"cross-encoder loaded from model {HUB_NAME}" in line for line in logs)
        assert client.get("/health").json()["cross_encoder"]["model"] == HUB_NAME
        assert client.post("/rerank", json={"query": QUERY, "documents": _documents(2)}).is_success


@pytest.mark.spec("PRV-11.5")
def test_a_model_that_cannot_be_loaded_stops_the_start_up_with_a_non_zero_status(tmp_path):
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "UPSTREAM_DATA_DIR": str(tmp_path / "data")}
    for server_var in ("NATS_URL", "QDRANT_URL", "PERSISTENCE_MODULE", "CROSS_ENCODER_MODEL"):
        env.pop(server_var, None)
    command = [sys.executable, "-m", "api.cli", "serve", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--cross-encoder", "no-such-org/no-such-reranker"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    answered = False
    deadline = time.monotonic() + 180
    while process.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            answered = (
                answered or httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).is_success
            )
        time.sleep(0.3)
    if process.poll() is None:
        process.kill()
    output = process.communicate()[0]
    assert process.returncode not in (None, 0), output
    assert not answered, "the service served requests although its model failed to load"
    fatal = [line for line in output.splitlines() if "CRITICAL" in line]
    assert fatal and "no-such-org/no-such-reranker" in fatal[0] and "fatal" in fatal[0]
    assert "OSError" in fatal[0] or "couldn't" in fatal[0].lower()  # the failure's details


# -- disabled ---------------------------------------------------------------------------------
@pytest.mark.spec("PRV-10.3", "PRV-11.6", "PRV-13.3")
def test_without_a_model_the_banner_says_how_to_enable_it_and_rerank_is_503(without_model):
    client, container, logs = without_model
    assert container.reranker is None
    assert any("cross-encoder disabled" in line for line in logs)
    assert any(f"--cross-encoder {EXAMPLE_MODEL}" in line for line in logs)
    assert any("--list-reranker-models" in line for line in logs)
    assert client.get("/health").status_code == 200  # started without loading a model
    reply = client.post("/rerank", json={"query": QUERY, "documents": _documents(2)})
    assert reply.status_code == 503
    assert reply.json()["message"] == CROSS_ENCODER_NOT_LOADED
    assert reply.json()["error"] == "cross_encoder_not_loaded"


@pytest.mark.spec("PRV-12.2")
def test_health_without_a_model_has_no_cross_encoder_field(without_model, with_model):
    plain = without_model[0].get("/health").json()
    loaded = with_model[0].get("/health").json()
    assert "cross_encoder" not in plain
    assert set(loaded) - set(plain) == {"cross_encoder"}  # otherwise the same format


# -- the endpoint -------------------------------------------------------------------------------
@pytest.mark.spec("PRV-13.1", "PRV-13.7")
def test_rerank_scores_every_pair_and_sorts_by_score(with_model, reference):
    client = with_model[0]
    documents = [{"id": 100 + i, "text": t, "source": "x"} for i, t in enumerate(TEXTS)]
    reply = client.post("/rerank", json={"query": QUERY, "documents": documents})
    assert reply.status_code == 200
    reranked = reply.json()["reranked"]
    expected = _expected_order(reference, TEXTS)
    assert [r["original_rank"] for r in reranked] == [rank for rank, _ in expected]
    for item, (rank, score) in zip(reranked, expected, strict=True):
        assert isinstance(item["score"], float) and item["score"] == pytest.approx(score, abs=1e-5)
        assert item["id"] == documents[rank - 1]["id"]  # the document's own id, as sent
    assert [r["score"] for r in reranked] == sorted((r["score"] for r in reranked), reverse=True)


@pytest.mark.spec("PRV-13.2")
def test_top_k_scores_all_and_returns_the_best_k(with_model, reference):
    reply = with_model[0].post(
        "/rerank", json={"query": QUERY, "documents": _documents(10), "top_k": 3}
    )
    best = _expected_order(reference, TEXTS)[:3]
    assert [r["original_rank"] for r in reply.json()["reranked"]] == [rank for rank, _ in best]


@pytest.mark.spec("PRV-13.4")
def test_rerank_without_query_is_400(with_model):
    reply = with_model[0].post("/rerank", json={"documents": _documents(2)})
    assert reply.status_code == 400
    assert "query is required" in reply.json()["message"]


@pytest.mark.spec("PRV-13.5")
def test_rerank_without_documents_is_400(with_model):
    reply = with_model[0].post("/rerank", json={"query": QUERY})
    assert reply.status_code == 400
    assert "documents is required" in reply.json()["message"]


@pytest.mark.spec("PRV-13.6")
def test_rerank_of_no_documents_is_an_empty_list(with_model):
    reply = with_model[0].post("/rerank", json={"query": QUERY, "documents": []})
    assert reply.status_code == 200
    assert reply.json() == {"reranked": []}


@pytest.mark.spec("PRV-13.8")
def test_a_scoring_error_is_500_with_its_details_and_logged(with_model, caplog):
    client, container, _ = with_model
    head = [m for m in container.reranker.model.modules() if isinstance(m, torch.nn.Linear)][-1]
    weight = head.weight
    head.weight = torch.nn.Parameter(torch.zeros(1, 7))  # the forward pass now fails in torch
    try:
        with caplog.at_level(logging.ERROR):
            reply = client.post("/rerank", json={"query": QUERY, "documents": _documents(2)})
    finally:
        head.weight = weight
    assert reply.status_code == 500
    body = reply.json()
    assert body["error"] == "rerank_failed"
    assert "RuntimeError" in body["message"] and "shapes cannot be multiplied" in body["message"]
    assert any("cross-encoder scoring failed" in r.getMessage() for r in caplog.records)
    assert client.post("/rerank", json={"query": QUERY, "documents": _documents(2)}).is_success


# -- search opts in ----------------------------------------------------------------------------
def _ingest(client: TestClient, project: str) -> None:
    files = [{"path": f"docs/n{i}.md", "content": text} for i, text in enumerate(TEXTS)]
    reply = client.post("/api/v1/ingest?wait=true", json={"project_id": project, "files": files})
    assert reply.status_code == 200, reply.text


def test_search_with_rerank_orders_the_hits_by_the_cross_encoder(with_model, reference):
    client, container, _ = with_model
    _ingest(client, "rerank-search")
    body = {"query": QUERY, "project_id": "rerank-search", "top_k": 4, "rerank": True}
    reply = client.post("/api/v1/search", json=body).json()
    assert reply["reranked"] is True
    texts = {
        p.payload["urn"]: p.payload["text"]
        for p in container.index.dump()
        if p.payload["project_id"] == "rerank-search"
    }
    scored = reference.predict([(QUERY, texts[h["urn"]]) for h in reply["hits"]]).tolist()
    assert [h["rerank_score"] for h in reply["hits"]] == pytest.approx(scored, abs=1e-4)
    everything = reference.predict([(QUERY, t) for t in texts.values()]).tolist()
    assert max(everything) == pytest.approx(reply["hits"][0]["rerank_score"], abs=1e-4)
    assert len(reply["hits"]) == 4


def test_search_asking_to_rerank_without_a_model_keeps_the_vector_order(without_model):
    client = without_model[0]
    _ingest(client, "plain-search")
    body = {"query": QUERY, "project_id": "plain-search", "top_k": 4, "rerank": True}
    reply = client.post("/api/v1/search", json=body).json()
    assert reply["reranked"] is False
    assert all(h["rerank_score"] is None for h in reply["hits"])
    scores = [h["score"] for h in reply["hits"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 4
