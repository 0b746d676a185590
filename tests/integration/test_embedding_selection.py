"""Embeddings through configuration: `EMBEDDING_SOURCE`, the `embedding` model configuration,
Ollama's `/api/embed` (a scripted server on 127.0.0.1: order, batches of 50, 768-d, timeouts
retried 2/4/8 s, not running, model missing), the embedding cache in front of it, search
through it, and the vector collection refusing another model with a clear error."""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from adapters.cache_store import MemoryStore
from adapters.duckdb_model_configs import DuckDBModelConfigs
from adapters.embedding_cache import CachingEmbedder
from adapters.embedding_selection import (
    ConfiguredEmbedder,
    EmbeddingProviderUnsupported,
    EmbeddingUnavailable,
    OllamaEmbedder,
    build_embedder,
)
from adapters.embeddings import SentenceTransformerEmbedder
from adapters.llm.settings import LLMSettings
from adapters.memory import InMemoryVectorIndex
from adapters.qdrant_index import EmbeddingModelMismatch, QdrantVectorIndex
from adapters.settings import Settings
from commands.model_config import CreateModelConfig, SeedModelConfigs, UpdateModelConfig
from domain.model_config import AllModelsDisabled, NoModelsConfigured
from domain.ports import VectorPoint
from projections.model_configs import ModelConfigsProjection
from projections.rebuild import catch_up
from queries.search import SearchService
from tests.integration.test_llm_providers import Reply, ScriptedServer

pytestmark = pytest.mark.integration

NOMIC = "nomic-embed-text"


def vector_for(text: str, dimension: int = 768) -> list[float]:
    """What the scripted Ollama answers for `text`: deterministic, unit length."""
    seed = hashlib.sha256(text.encode()).digest()
    raw = [((seed[i % 32] + i) % 17) - 8.0 for i in range(dimension)]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [x / norm for x in raw]


class OllamaEmbedServer(ScriptedServer):
    """`/api/embed` computed from the input (768-d); other paths and models from the script."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_inputs: list[list[str]] = []

    def answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any] | None) -> None:
        scripted = body is not None and str(body.get("model")) in self.script
        if handler.path != "/api/embed" or body is None or scripted:
            super().answer(handler, body)
            return
        texts = list(body["input"])
        self.embed_inputs.append(texts)
        self.requests.append({"path": handler.path, "body": body, "key": "embed", "headers": {}})
        payload = json.dumps(
            {"model": body["model"], "embeddings": [vector_for(t) for t in texts]}
        ).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)


@pytest.fixture
def ollama() -> Iterator[OllamaEmbedServer]:
    with OllamaEmbedServer() as server:
        yield server


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def llm_settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> LLMSettings:
    for name in ("EMBEDDING_SOURCE", "OLLAMA_BASE_URL", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return LLMSettings()  # type: ignore[call-arg]


@pytest.fixture
def read_model(memory_app, tmp_path: Path) -> Iterator[tuple[DuckDBModelConfigs, Any]]:
    store = DuckDBModelConfigs(tmp_path / "model_configs.duckdb")
    projection = ModelConfigsProjection(store)
    projection.start()
    yield store, lambda: catch_up(projection, memory_app)
    store.close()


# --- the choice --------------------------------------------------------------------------


def test_the_default_is_the_local_model_exactly_as_before(monkeypatch, tmp_path) -> None:
    settings = Settings(EMBEDDING_BATCH_SIZE=16)  # type: ignore[call-arg]
    embedder = build_embedder(settings, llm_settings(monkeypatch))
    assert type(embedder) is SentenceTransformerEmbedder
    assert embedder.model_name == "all-MiniLM-L6-v2" and embedder._batch_size == 16
    configured = build_embedder(settings, llm_settings(monkeypatch, EMBEDDING_SOURCE="config"))
    assert isinstance(configured, ConfiguredEmbedder) and not configured.resolved
    with pytest.raises(NoModelsConfigured, match="Embedding model not configured"):
        configured.embed(["x"])  # nothing chosen before start-up resolves it


@pytest.mark.spec("CFG-11.1")
def test_the_embedding_model_comes_from_the_embedding_configuration(
    monkeypatch, memory_app, read_model, ollama
) -> None:
    store, caught_up = read_model
    llm = llm_settings(monkeypatch, EMBEDDING_SOURCE="config", OLLAMA_BASE_URL=ollama.url)
    selection = ConfiguredEmbedder(llm)

    # no configuration: 503 "Embedding model not configured", never a hard-coded model
    with pytest.raises(NoModelsConfigured) as missing:
        selection.resolve_from(store.get_fallback_chain)
    assert missing.value.message == "Embedding model not configured"
    assert missing.value.body()["error"] == "No models configured"
    assert "EMBEDDING_SOURCE=local" in missing.value.detail_hint

    # THEN it calls get_active_model("embedding") AND uses the configured model_id for Ollama
    memory_app.seed_model_configs(SeedModelConfigs())
    caught_up()
    chosen = selection.resolve_from(store.get_fallback_chain)
    assert isinstance(chosen, OllamaEmbedder) and chosen.base_url == ollama.url
    assert (selection.model_name, selection.dimension) == (f"ollama/{NOMIC}", 768)
    [vector] = selection.embed(["orders feed customer_summary"])
    assert vector == pytest.approx(vector_for("orders feed customer_summary"))
    assert ollama.requests[-1]["path"] == "/api/embed"
    assert ollama.requests[-1]["body"] == {
        "model": NOMIC,
        "input": ["orders feed customer_summary"],
    }

    # another model id in the configuration is the one called
    row = store.get_active_model("embedding")
    memory_app.update_model_config(UpdateModelConfig(config_id=row["id"], model_id="all-minilm"))
    caught_up()
    other = ConfiguredEmbedder(llm)
    other.resolve_from(store.get_fallback_chain)
    assert other.model_name == "ollama/all-minilm" and other.dimension == 384

    # every embedding model disabled: the spec's other 503
    memory_app.update_model_config(UpdateModelConfig(config_id=row["id"], enabled=False))
    caught_up()
    with pytest.raises(AllModelsDisabled):
        ConfiguredEmbedder(llm).resolve_from(store.get_fallback_chain)


def test_a_provider_without_embeddings_is_a_clear_error(monkeypatch, memory_app, read_model):
    store, caught_up = read_model
    memory_app.create_model_config(
        CreateModelConfig(
            usage_type="embedding", priority=1, model_id="qwen/qwen3-4b:free", provider="openrouter"
        )
    )
    caught_up()
    with pytest.raises(EmbeddingProviderUnsupported, match="provider 'openrouter'") as caught:
        ConfiguredEmbedder(llm_settings(monkeypatch)).resolve_from(store.get_fallback_chain)
    assert "ollama" in caught.value.detail_hint


# --- Ollama /api/embed ---------------------------------------------------------------------


@pytest.mark.spec("LLM-02.1")
def test_text_embedding_checks_the_cache_then_calls_ollama_on_a_miss(ollama) -> None:
    ollama_embedder = OllamaEmbedder(ollama.url, NOMIC)
    cached = CachingEmbedder(ollama_embedder, MemoryStore())
    try:
        # WHEN the system embeds a text THEN Ollama's nomic-embed-text gives a 768-d vector
        [first] = cached.embed(["select * from stg_orders"])
        assert len(first) == 768 and ollama_embedder.dimension == 768
        assert ollama.embed_inputs == [["select * from stg_orders"]]
        assert ollama.requests[0]["body"]["model"] == NOMIC
        # AND the cache is checked first: the same text again does not call Ollama
        [again] = cached.embed(["select * from stg_orders"])
        assert again == first and len(ollama.embed_inputs) == 1
        # AND the embedding is deterministic for the same input (also without the cache)
        [fresh] = ollama_embedder.embed(["select * from stg_orders"])
        assert fresh == pytest.approx(first, abs=1e-6)
    finally:
        ollama_embedder.close()


@pytest.mark.spec("LLM-02.2")
def test_batch_embedding_keeps_input_order_splits_at_50_and_sends_only_misses(ollama) -> None:
    texts = [f"model_{i}.sql: select {i} from raw.orders" for i in range(120)]
    ollama_embedder = OllamaEmbedder(ollama.url, NOMIC)
    try:
        vectors = ollama_embedder.embed(texts)
        # batches of 50 per request, in order
        assert [len(batch) for batch in ollama.embed_inputs] == [50, 50, 20]
        assert [t for batch in ollama.embed_inputs for t in batch] == texts
        # AND embeddings come back in the same order as the inputs
        assert len(vectors) == 120
        for text, vector in zip(texts, vectors, strict=True):
            assert vector == pytest.approx(vector_for(text), abs=1e-6)

        # THEN the cache is checked for each text AND only uncached texts are sent to Ollama
        ollama.embed_inputs.clear()
        cached = CachingEmbedder(ollama_embedder, MemoryStore())
        cached.embed([texts[1], texts[3]])
        mixed = [texts[0], texts[1], texts[2], texts[3], texts[4]]
        got = cached.embed(mixed)
        assert ollama.embed_inputs == [[texts[1], texts[3]], [texts[0], texts[2], texts[4]]]
        for text, vector in zip(mixed, got, strict=True):
            assert vector == pytest.approx(vector_for(text), abs=1e-6)
    finally:
        ollama_embedder.close()


@pytest.mark.spec("LLM-05.2")
def test_an_embedding_timeout_is_retried_three_times_2_4_8_s_then_a_clear_error(
    ollama, caplog: pytest.LogCaptureFixture
) -> None:
    ollama.on(NOMIC, Reply(hang=5.0, body=b"{}"))
    sleeps = Sleeps()
    embedder = OllamaEmbedder(ollama.url, NOMIC, timeout_s=0.2, sleep=sleeps)
    caplog.set_level(logging.WARNING, logger="adapters.embedding_selection")
    try:
        with pytest.raises(EmbeddingUnavailable) as caught:
            embedder.embed(["x"])
    finally:
        embedder.close()
    # THEN it retries up to 3 times AND uses exponential backoff (2s, 4s, 8s)
    assert ollama.calls(NOMIC) == 4 and sleeps.calls == [2.0, 4.0, 8.0]
    # AND it logs timeout details
    retries = [r.getMessage() for r in caplog.records if "embedding timeout" in r.getMessage()]
    assert len(retries) == 3 and f"model={NOMIC}" in retries[0] and "timeout=0.2s" in retries[0]
    # AND it returns an error after retries are exhausted
    assert caught.value.message == (
        f"Ollama did not answer the embedding request for {NOMIC} within 0.2 s (4 attempts)"
    )
    assert caught.value.to_dict()["code"] == "embedding_unavailable"


def test_ollama_not_running_or_model_missing_fails_at_once_with_what_to_do(ollama) -> None:
    with ScriptedServer() as gone:
        url = gone.url
    sleeps = Sleeps()
    down = OllamaEmbedder(url, NOMIC, sleep=sleeps)
    with pytest.raises(EmbeddingUnavailable, match=f"Ollama is not running at {url}") as caught:
        down.embed(["x"])
    assert sleeps.calls == [] and "ollama serve" in caught.value.detail_hint
    ollama.on("mxbai-embed-large", Reply(404, b'{"error": "model \\"mxbai\\" not found"}'))
    missing = OllamaEmbedder(ollama.url, "mxbai-embed-large")
    with pytest.raises(EmbeddingUnavailable, match="ollama pull mxbai-embed-large"):
        missing.embed(["x"])
    missing.close()


# --- chat and search embed queries with Ollama -----------------------------------------------


@pytest.mark.spec("LLM-15.2")
def test_queries_are_embedded_by_ollama_and_searched_in_the_vector_index(
    monkeypatch, memory_app, read_model, ollama
) -> None:
    store, caught_up = read_model
    memory_app.seed_model_configs(SeedModelConfigs())
    caught_up()
    selection = ConfiguredEmbedder(
        llm_settings(monkeypatch, EMBEDDING_SOURCE="config", OLLAMA_BASE_URL=ollama.url)
    )
    selection.resolve_from(store.get_fallback_chain)
    index = InMemoryVectorIndex()
    index.ensure(selection.dimension, selection.model_name)
    chunks = {
        "urn:li:file:shop:models/stg_orders.sql": "select id, amount from raw.orders",
        "urn:li:file:shop:models/customers.sql": "select id, name from raw.customers",
    }
    vectors = selection.embed(list(chunks.values()))
    index.upsert(
        [
            VectorPoint(str(i), v, _chunk_payload(urn))
            for i, (urn, v) in enumerate(zip(chunks, vectors, strict=True))
        ]
    )
    ollama.embed_inputs.clear()

    hits = SearchService(selection, index).search("select id, amount from raw.orders", top_k=1)

    # THEN the query is embedded with the local Ollama (nomic-embed-text) ...
    assert ollama.embed_inputs == [["select id, amount from raw.orders"]]
    assert ollama.requests[-1]["body"]["model"] == NOMIC
    # AND the embedding is used for the vector similarity search
    assert hits[0].urn == "urn:li:file:shop:models/stg_orders.sql"
    # AND OpenRouter is only used for generation: no embedding request went anywhere else
    assert {r["path"] for r in ollama.requests} == {"/api/embed"}
    selection.delegate.close()  # type: ignore[attr-defined]


def _chunk_payload(urn: str) -> dict[str, Any]:
    path = urn.rsplit(":", 1)[1]
    return {
        "tenant_id": "default",
        "urn": urn,
        "file_urn": urn,
        "path": path,
        "project_id": "shop",
        "line_start": 1,
        "line_end": 1,
        "chunk_type": "sql",
    }


# --- the collection records its model ------------------------------------------------------


def test_a_collection_refuses_another_embedding_model_until_rebuilt(tmp_path: Path) -> None:
    first = QdrantVectorIndex("chunks", path=tmp_path / "qdrant")
    first.ensure(384, "all-MiniLM-L6-v2")
    first.close()
    switched = QdrantVectorIndex("chunks", path=tmp_path / "qdrant")
    try:
        with pytest.raises(EmbeddingModelMismatch) as caught:
            switched.ensure(768, f"ollama/{NOMIC}")
        error = caught.value
        assert error.message == (
            "collection 'chunks' holds 384-d vectors of 'all-MiniLM-L6-v2', but the embedder "
            f"is 'ollama/{NOMIC}' (768-d). Run `upstream replay vectors` to rebuild it with "
            "the configured model."
        )
        assert error.to_dict()["code"] == "embedding_model_mismatch"
        assert "upstream replay vectors" in error.detail_hint
        # the rebuild (`upstream replay vectors`) drops the collection and recreates it
        switched.drop()
        switched.ensure(768, f"ollama/{NOMIC}")
        switched.upsert([VectorPoint("00000000-0000-0000-0000-000000000001", [0.1] * 768, {})])
        assert switched.count() == 1
    finally:
        switched.close()
