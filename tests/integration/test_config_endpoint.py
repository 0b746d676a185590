"""`GET /api/v1/config` (the chat endpoints' chains, temperatures and timeouts from the read
model and the environment), `GET /api/v1/models/usage` (token accounting), and the
per-endpoint temperature the gateway applies."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from adapters.duckdb_model_configs import DuckDBModelConfigs
from adapters.llm.settings import LLMSettings
from adapters.memory import HashingEmbedder
from api.errors import install_error_handlers
from api.routes import config as config_routes
from api.routes import models as models_routes
from commands.model_config import SeedModelConfigs
from domain.llm import ChainEntry, ChatMessage, Completion, CompletionRequest
from projections.model_configs import ModelConfigsProjection
from projections.rebuild import catch_up
from queries.gateway import Gateway, GatewayConfig

pytestmark = pytest.mark.integration

R1 = "deepseek/deepseek-r1-0528:free"
DEVSTRAL = "mistralai/devstral-2512:free"
GEMINI = "google/gemini-2.0-flash-exp:free"
QWEN = "qwen/qwen3-4b:free"
MISTRAL = "mistralai/mistral-7b-instruct:free"


class Recorder:
    """A provider that answers JSON and records the temperature of every call."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.calls: list[tuple[str, float]] = []

    @property
    def name(self) -> str:
        return self._name

    async def complete(self, request: CompletionRequest, model: str) -> Completion:
        self.calls.append((model, request.temperature))
        return Completion('{"answer": "ok"}', model, self._name, 40, 8)

    async def stream(self, request: CompletionRequest, model: str) -> AsyncIterator[str]:
        yield "{}"

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        return []

    async def aclose(self) -> None:
        return None


def llm_settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> LLMSettings:
    for name in ("CHAT_DEEP_TEMPERATURE", "LLM_TIMEOUT_DEEP", "INFERENCE_FALLBACK_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return LLMSettings()  # type: ignore[call-arg]


@pytest.fixture
def read_model(memory_app, tmp_path: Path) -> Iterator[DuckDBModelConfigs]:
    store = DuckDBModelConfigs(tmp_path / "model_configs.duckdb")
    projection = ModelConfigsProjection(store)
    projection.start()
    store.seed = lambda: (  # type: ignore[attr-defined]
        memory_app.seed_model_configs(SeedModelConfigs()),
        catch_up(projection, memory_app),
    )
    yield store
    store.close()


def client_for(store: DuckDBModelConfigs, gateway: Gateway) -> TestClient:
    web = FastAPI()
    install_error_handlers(web)
    web.include_router(config_routes.router)
    web.include_router(models_routes.router)
    web.state.container = SimpleNamespace(
        model_configs=store, gateway=gateway, embedder=HashingEmbedder(), embedding_config=None
    )
    return TestClient(web)


@pytest.mark.spec("LLM-24.2")
def test_config_exposes_each_endpoint_chain_temperature_and_timeout(
    monkeypatch: pytest.MonkeyPatch, read_model: DuckDBModelConfigs
) -> None:
    llm = llm_settings(monkeypatch, CHAT_DEEP_TEMPERATURE="0.7", LLM_TIMEOUT_DEEP="120")
    gateway = Gateway({}, config=GatewayConfig(**llm.gateway_options()))
    client = client_for(read_model, gateway)

    # no configuration: each endpoint shows the 503 body its requests would get
    empty = client.get("/api/v1/config").json()["endpoints"]["/api/chat/deep"]
    assert empty["chain"] == [] and empty["error"]["error"] == "No models configured"

    read_model.seed()  # type: ignore[attr-defined]
    reply = client.get("/api/v1/config")
    assert reply.status_code == 200
    body = reply.json()
    endpoints = body["endpoints"]
    # THEN the default models (primary/secondary/tertiary) per endpoint come from the
    # configuration, with their temperatures; AND the mappings are exposed here
    expected = {
        "/api/chat/deep": ("chat_deep", [R1, DEVSTRAL, GEMINI]),
        "/api/chat/graph": ("chat_graph", [DEVSTRAL, R1, GEMINI]),
        "/api/chat/semantic": ("chat_semantic", [GEMINI, QWEN, MISTRAL]),
        "/api/chat/text": ("chat_text", [GEMINI, MISTRAL, QWEN]),
        "/api/chat/title": ("chat_title", [GEMINI, MISTRAL, QWEN]),
    }
    for path, (usage, models) in expected.items():
        assert endpoints[path]["usage_type"] == usage
        assert [e["model_id"] for e in endpoints[path]["chain"]] == models
        assert [e["priority"] for e in endpoints[path]["chain"]] == [1, 2, 3]
        assert endpoints[path]["error"] is None
    assert endpoints["/api/chat/deep"]["chain"][0]["temperature"] == 0.6
    assert endpoints["/api/chat/graph"]["chain"][0]["temperature"] == 0.1
    assert endpoints["/api/chat/semantic"]["chain"][0]["temperature"] == 0.2
    # AND temperature is configurable per endpoint via environment variables
    temperatures = {p: e["temperature"] for p, e in endpoints.items()}
    assert temperatures == {
        "/api/chat/deep": 0.7,
        "/api/chat/graph": 0.1,
        "/api/chat/semantic": 0.2,
        "/api/chat/text": 0.3,
        "/api/chat/title": 0.2,
    }
    timeouts = {p: e["timeout_s"] for p, e in endpoints.items()}
    assert timeouts == {
        "/api/chat/deep": 120.0,
        "/api/chat/graph": 45.0,
        "/api/chat/semantic": 45.0,
        "/api/chat/text": 30.0,
        "/api/chat/title": 30.0,
    }
    assert body["gateway"]["base_delay_s"] == 2.0 and body["gateway"]["backoff_factor"] == 2.0
    assert body["embedding"] == {"source": "local", "model": "hashing-test", "dimension": 64}
    assert json.dumps(body)  # plain JSON


@pytest.mark.spec("LLM-24.2")
async def test_the_gateway_applies_the_endpoint_temperature_to_entries_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llm = llm_settings(monkeypatch, CHAT_DEEP_TEMPERATURE="0.7")
    provider = Recorder("openrouter")
    gateway = Gateway({"openrouter": provider}, config=GatewayConfig(**llm.gateway_options()))
    request = CompletionRequest(messages=(ChatMessage("user", "why?"),), temperature=0.25)
    configured = [ChainEntry(R1, "openrouter", 1, {"temperature": 0.6})]
    override = [ChainEntry(QWEN, "openrouter", 0)]  # e.g. a model override: no parameters

    await gateway.complete("chat_deep", configured, request, "/api/chat/deep")
    await gateway.complete("chat_deep", override, request, "/api/chat/deep")
    await gateway.complete("chat_graph", override, request, "/api/chat/graph")
    await gateway.complete("inference", override, request, "inference")

    assert provider.calls == [
        (R1, 0.6),  # the configuration's parameters win
        (QWEN, 0.7),  # CHAT_DEEP_TEMPERATURE
        (QWEN, 0.1),  # the graph endpoint's default
        (QWEN, 0.25),  # not a chat endpoint: the request's own
    ]


@pytest.mark.spec("LLM-13.2")
def test_usage_is_accounted_per_provider_in_tokens(read_model: DuckDBModelConfigs) -> None:
    remote, local = Recorder("openrouter"), Recorder("ollama")
    registry = CollectorRegistry()
    gateway = Gateway({"openrouter": remote, "ollama": local}, registry=registry)
    client = client_for(read_model, gateway)
    request = CompletionRequest(messages=(ChatMessage("user", "why?"),))

    async def run() -> None:
        await gateway.complete("chat_text", [ChainEntry(GEMINI, "openrouter", 1)], request, "t")
        await gateway.complete("chat_text", [ChainEntry(GEMINI, "openrouter", 1)], request, "t")
        await gateway.complete("inference", [ChainEntry("llama3.1:8b", "ollama", 1)], request, "i")

    asyncio.run(run())
    body: dict[str, Any] = client.get("/api/v1/models/usage").json()
    openrouter = body["providers"]["openrouter"]
    assert (openrouter["calls"], openrouter["prompt_tokens"], openrouter["completion_tokens"]) == (
        2,
        80,
        16,
    )
    assert openrouter["billing"] == "free_tier" and openrouter["cost_usd"] == 0.0
    assert openrouter["models"][GEMINI]["total_tokens"] == 96
    assert body["providers"]["ollama"]["billing"] == "local"
    assert body["totals"] == {
        "calls": 3,
        "prompt_tokens": 120,
        "completion_tokens": 24,
        "total_tokens": 144,
        "cost_usd": 0.0,
    }
    assert body["unit"] == "tokens" and body["since"].endswith("Z")
    labels = {"provider": "openrouter", "model": GEMINI}
    assert registry.get_sample_value("llm_requests_total", labels) == 2
