"""`EMBEDDING_SOURCE=config` through `bootstrap()`: the process resolves its embedder from the
`embedding` model configuration at start (after seeding a fresh store and catching the
model_configs read model up), and a collection built with another model is rebuilt by
`upstream replay vectors` (offline) instead of being silently mixed."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.bootstrap import bootstrap
from adapters.embedding_selection import OllamaEmbedder
from adapters.qdrant_index import EmbeddingModelMismatch, QdrantVectorIndex
from adapters.settings import Settings
from commands.model_config import SeedModelConfigs
from commands.models import IngestFile
from tests.integration.test_embedding_selection import OllamaEmbedServer
from tests.integration.test_llm_providers import Reply

pytestmark = pytest.mark.integration

NOMIC = "nomic-embed-text"


@pytest.fixture
def ollama() -> Iterator[OllamaEmbedServer]:
    with OllamaEmbedServer() as server:
        server.on("/api/tags", Reply(body=b'{"models": [{"name": "nomic-embed-text:latest"}]}'))
        server.on("/api/ps", Reply(body=b'{"models": []}'))
        yield server


@pytest.fixture
def config_mode(monkeypatch: pytest.MonkeyPatch, ollama: OllamaEmbedServer) -> None:
    monkeypatch.setenv("EMBEDDING_SOURCE", "config")
    monkeypatch.setenv("OLLAMA_BASE_URL", ollama.url)
    for name in ("OPENROUTER_API_KEY", "UPSTREAM_SEED_PROFILE", "NATS_URL", "QDRANT_URL"):
        monkeypatch.delenv(name, raising=False)


def _settings(tmp_path: Path, **env: object) -> Settings:
    return Settings(UPSTREAM_DATA_DIR=tmp_path / "data", **env)  # type: ignore[arg-type]


async def test_offline_replay_rebuilds_a_collection_of_another_model_with_the_configured_one(
    config_mode: None,
    ollama: OllamaEmbedServer,
    sqlite_app,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sqlite_app.seed_model_configs(SeedModelConfigs())  # embedding: nomic-embed-text on Ollama
    sqlite_app.ingest_file(IngestFile(path="models/stg_orders.sql", content="select 1 from t"))
    built_before = QdrantVectorIndex("chunks", path=tmp_path / "qdrant")
    built_before.ensure(384, "all-MiniLM-L6-v2")
    built_before.close()

    index = QdrantVectorIndex("chunks", path=tmp_path / "qdrant")
    container = bootstrap(_settings(tmp_path), "offline", index=index, app=sqlite_app)
    caplog.set_level(logging.WARNING, logger="upstream.bootstrap")
    await container.start()
    try:
        # the embedder came from the configuration, resolved at start
        assert container.embedding_config is not None and container.embedding_config.resolved
        assert isinstance(container.embedding_config.delegate, OllamaEmbedder)
        assert container.embedder.model_name == f"ollama/{NOMIC}"
        # the old collection is reported, not mixed (offline, so replay can fix it)
        assert "holds 384-d vectors of 'all-MiniLM-L6-v2'" in caplog.text
        with pytest.raises(EmbeddingModelMismatch):
            index.ensure(768, f"ollama/{NOMIC}")

        applied = await container.replay("vectors")
        assert applied["vectors"] > 0 and index.count() > 0
        index.ensure(768, f"ollama/{NOMIC}")  # the collection now records the new model
        assert ollama.embed_inputs  # the chunks were embedded by Ollama
    finally:
        await container.stop()


async def test_a_fresh_worker_seeds_then_embeds_with_the_configured_model(
    config_mode: None,
    ollama: OllamaEmbedServer,
    nats_server,
    sqlite_app,
    tmp_path: Path,
) -> None:
    from adapters.memory import InMemoryVectorIndex

    index = InMemoryVectorIndex()
    settings = _settings(tmp_path, NATS_URL=nats_server.url)
    container = bootstrap(settings, "worker", index=index, app=sqlite_app)
    await container.start()
    try:
        # the `local` profile (Ollama answers) was seeded before the embedder was chosen
        row = container.model_configs.get_active_model("embedding")
        assert (row["model_id"], row["provider"]) == (NOMIC, "ollama")
        assert container.embedder.model_name == f"ollama/{NOMIC}"
        assert index.model == (768, f"ollama/{NOMIC}")
    finally:
        await container.stop()


async def test_config_mode_without_an_embedding_configuration_refuses_to_start(
    config_mode: None, sqlite_app, tmp_path: Path
) -> None:
    from adapters.memory import InMemoryVectorIndex
    from domain.model_config import NoModelsConfigured

    container = bootstrap(
        _settings(tmp_path), "offline", index=InMemoryVectorIndex(), app=sqlite_app
    )
    with pytest.raises(NoModelsConfigured) as caught:
        await container.start()
    await container.stop()
    assert caught.value.message == "Embedding model not configured"
    assert "EMBEDDING_SOURCE=local" in caught.value.detail_hint
