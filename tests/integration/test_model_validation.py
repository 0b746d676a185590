"""Model validation (rag-service.md "Model Validation"): the allowlist is the configuration,
an Ollama model must be pulled (`/api/tags` of a scripted Ollama on 127.0.0.1), and a chat
request's `model` override goes first in the chain."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.duckdb_model_configs import DuckDBModelConfigs
from adapters.llm.ollama import OllamaProvider
from commands.model_config import SeedModelConfigs
from domain.llm import (
    ChainEntry,
    LLMConnectionError,
    ModelNotAllowed,
    ModelUnavailable,
)
from projections.model_configs import ModelConfigsProjection
from projections.rebuild import catch_up
from queries.free_tier import FreeTierPolicy, enforce_chain
from queries.model_override import ModelValidator
from tests.integration.test_llm_providers import Reply, ScriptedServer

pytestmark = pytest.mark.integration

LLAMA = "llama3.1:8b"
GEMINI = "google/gemini-2.0-flash-exp:free"


def tags(*names: str) -> Reply:
    return Reply(body=json.dumps({"models": [{"name": n} for n in names]}).encode())


@pytest.fixture
def ollama() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def configs(memory_app, tmp_path: Path) -> Iterator[DuckDBModelConfigs]:
    """The `local` profile with Ollama (llama3.1:8b first, extractive last) in the read model."""
    store = DuckDBModelConfigs(tmp_path / "model_configs.duckdb")
    projection = ModelConfigsProjection(store)
    projection.start()
    memory_app.seed_model_configs(
        SeedModelConfigs(profile="local", ollama_base_url="http://ollama:11434")
    )
    catch_up(projection, memory_app)
    yield store
    store.close()


def validator(
    store: DuckDBModelConfigs, url: str, cloud: tuple[str, ...] = ()
) -> tuple[ModelValidator, OllamaProvider]:
    provider = OllamaProvider(url)
    rows: Any = lambda: store.list_configs(enabled=True)  # noqa: E731
    return ModelValidator(rows, provider, cloud_providers=cloud, timeout_s=2.0), provider


@pytest.mark.spec("RAG-08", "RAG-19")
async def test_a_configured_and_pulled_model_passes(configs, ollama) -> None:
    ollama.on("/api/tags", tags(f"{LLAMA}", "nomic-embed-text:latest"))
    check, provider = validator(configs, ollama.url)
    try:
        entry = await check.validate(LLAMA)
        assert (entry.model_id, entry.provider) == (LLAMA, "ollama")
        # `model:latest` in Ollama satisfies `model`
        assert (await check.validate("nomic-embed-text")).model_id == "nomic-embed-text"
        assert (await check.validate("extractive")).provider == "extractive"  # no Ollama check
    finally:
        await provider.aclose()
    assert [r["path"] for r in ollama.requests] == ["/api/tags", "/api/tags"]


@pytest.mark.spec("RAG-08", "RAG-20")
async def test_a_model_outside_the_allowlist_or_not_pulled_raises(configs, ollama) -> None:
    ollama.on("/api/tags", tags("nomic-embed-text"))  # llama3.1:8b is not pulled
    check, provider = validator(configs, ollama.url)
    try:
        with pytest.raises(ModelNotAllowed) as refused:
            await check.validate("qwen3:8b")
        assert refused.value.message == (
            "Model 'qwen3:8b' not in allowlist. Available: "
            "['extractive', 'llama3.1:8b', 'nomic-embed-text']"
        )
        assert ollama.requests == []  # refused before asking Ollama
        with pytest.raises(ModelUnavailable) as missing:
            await check.validate(LLAMA)
        assert missing.value.message == (
            f"Model '{LLAMA}' not available in Ollama. Run: ollama pull {LLAMA}"
        )
    finally:
        await provider.aclose()
    with ScriptedServer() as gone:
        url = gone.url
    down, closed = validator(configs, url)
    with pytest.raises(LLMConnectionError, match=f"Cannot connect to Ollama at {url}"):
        await down.validate(LLAMA)
    await closed.aclose()


@pytest.mark.spec("RAG-27")
async def test_health_check_verifies_ollama_connectivity(configs, ollama) -> None:
    ollama.on("/api/tags", tags(LLAMA, "nomic-embed-text"), tags("nomic-embed-text"))
    check, provider = validator(configs, ollama.url)
    try:
        healthy = await check.health_check()
        assert healthy["status"] == "ok" and healthy["error"] is None
        assert healthy["base_url"] == ollama.url
        assert healthy["configured_models"] == [LLAMA, "nomic-embed-text"]
        assert healthy["missing_models"] == []
        degraded = await check.health_check()
        assert degraded["status"] == "degraded"
        assert degraded["pull_commands"] == [f"ollama pull {LLAMA}"]
    finally:
        await provider.aclose()
    with ScriptedServer() as gone:
        url = gone.url
    down, closed = validator(configs, url)
    report = await down.health_check()
    await closed.aclose()
    assert report["status"] == "unavailable"
    assert report["error"].startswith(f"Cannot connect to Ollama at {url}")
    assert "ollama serve" in report["hint"]


@pytest.mark.spec("RAG-28")
async def test_a_custom_model_goes_first_and_the_chain_stays_behind_it(configs, ollama) -> None:
    ollama.on("/api/tags", tags(LLAMA))
    check, provider = validator(configs, ollama.url, cloud=("openrouter",))
    chain = [ChainEntry.from_row(r) for r in configs.get_fallback_chain("chat_text")]
    assert [e.model_id for e in chain] == [LLAMA, "extractive"]
    try:
        # a configured model: first, with its own configuration
        chosen = await check.chain_with_override("chat_text", chain, "extractive")
        assert [(e.model_id, e.provider) for e in chosen] == [
            ("extractive", "extractive"),
            (LLAMA, "ollama"),
        ]
        assert chosen[0].priority < chosen[1].priority
        assert await check.chain_with_override("chat_text", chain, None) == chain
        # a cloud model nobody configured: the free-tier policy judges it (free: kept)
        free = await check.chain_with_override("chat_text", chain, GEMINI)
        policy = FreeTierPolicy(None)
        enforced = await enforce_chain(policy, free)
        assert [e.model_id for e in enforced.entries] == [GEMINI, LLAMA, "extractive"]
        paid = await enforce_chain(
            policy, await check.chain_with_override("chat_text", chain, "openai/gpt-4")
        )
        assert paid.entries[0].model_id == GEMINI and paid.downgraded
    finally:
        await provider.aclose()
    # without a cloud provider an unknown model is refused (400) instead
    offline, closed = validator(configs, ollama.url)
    with pytest.raises(ModelNotAllowed):
        await offline.chain_with_override("chat_text", chain, "openai/gpt-4")
    await closed.aclose()
