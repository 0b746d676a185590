"""Hybrid inference and Ollama resilience end to end over HTTP: settings from the environment,
the real providers, the Ollama health monitor and the gateway against the scripted server of
test_llm_providers (Ollama's `/api/tags`, `/api/ps`, `/api/chat` and OpenRouter's
`/chat/completions` on one 127.0.0.1 port). Backoff sleeps are recorded, not slept."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from adapters.llm.ollama import OllamaProvider
from adapters.llm.settings import LLMSettings, build_llm_providers
from domain.llm import AllModelsFailed, ChainEntry, ChatMessage, CompletionRequest
from queries.gateway import Gateway, GatewayConfig
from queries.ollama_health import (
    HEALTHY,
    UNAVAILABLE,
    OllamaHealthConfig,
    OllamaHealthMonitor,
    health_component,
)
from tests.integration.test_llm_providers import ANSWER, Reply, ScriptedServer, chat_ok

pytestmark = pytest.mark.integration

GB = 1024**3
LLAMA, EMBED = "llama3.1:8b", "nomic-embed-text"
GEMINI = "google/gemini-2.0-flash-exp:free"
KEY = "sk-or-v1-hybrid-test-key"
OOM = b'{"error": "model requires more system memory (9.1 GiB) than is available (4.0 GiB)"}'


def tags(*names: str) -> Reply:
    models = [{"name": n, "model": n, "size": 4 * GB} for n in names]
    return Reply(body=json.dumps({"models": models}).encode())


def ps(*names: str) -> Reply:
    models = [{"name": n, "size": 5 * GB, "size_vram": 5 * GB} for n in names]
    return Reply(body=json.dumps({"models": models}).encode())


def ollama_says(text: str, model: str = LLAMA) -> Reply:
    body = {
        "model": model,
        "message": {"role": "assistant", "content": text},
        "done": True,
        "prompt_eval_count": 12,
        "eval_count": 5,
    }
    return Reply(body=json.dumps(body).encode())


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> LLMSettings:
    for name in (
        "INFERENCE_FALLBACK_PROVIDER",
        "INFERENCE_FALLBACK_MODEL",
        "OPENROUTER_API_KEY",
        "GROQ_API_KEY",
        "OLLAMA_USE_QUANTIZED",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return LLMSettings()  # type: ignore[call-arg]


def monitor_for(llm: LLMSettings, providers: dict[str, Any], chains: Any) -> OllamaHealthMonitor:
    fallback = llm.inference_fallback()
    config = OllamaHealthConfig(
        interval_s=3600,
        timeout_s=2.0,
        memory_budget_mb=16384.0,
        use_quantized=llm.ollama_use_quantized,
        fallback_provider=fallback.provider if fallback else None,
        fallback_model=fallback.model_id if fallback else None,
    )
    return OllamaHealthMonitor(providers["ollama"], [LLAMA, EMBED], config, chains=chains)


def hybrid(
    llm: LLMSettings, providers: dict[str, Any], monitor: OllamaHealthMonitor, **cfg: Any
) -> tuple[Gateway, Sleeps, CollectorRegistry]:
    sleeps, registry = Sleeps(), CollectorRegistry()
    options = {**llm.gateway_options(), **cfg}
    gateway = Gateway(
        providers,
        config=GatewayConfig(**options),
        sleep=sleeps,
        registry=registry,
        provider_health=monitor.provider_health,
        model_resolver=monitor.model_for,
    )
    return gateway, sleeps, registry


def ask(text: str = "what feeds customer_summary?") -> CompletionRequest:
    return CompletionRequest(
        messages=(ChatMessage("system", "Answer in JSON."), ChatMessage("user", text)),
        response_format="json_object",
    )


async def close(providers: dict[str, Any], monitor: OllamaHealthMonitor) -> None:
    await monitor.stop()
    for provider in providers.values():
        await provider.aclose()


INFERENCE = [ChainEntry(LLAMA, "ollama", 1)]  # the default seed's `inference` chain


@pytest.mark.spec("LLM-34.2", "LLM-34.4")
async def test_ollama_out_of_memory_falls_back_to_the_configured_provider_end_to_end(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server.on("/api/tags", tags(LLAMA, EMBED))
    server.on("/api/ps", ps(LLAMA))
    server.on(LLAMA, Reply(500, OOM))
    server.on(GEMINI, chat_ok(json.dumps(ANSWER), model=GEMINI))
    llm = settings(
        monkeypatch,
        OLLAMA_BASE_URL=server.url,
        OPENROUTER_BASE_URL=server.url,
        OPENROUTER_API_KEY=KEY,
        INFERENCE_FALLBACK_PROVIDER="openrouter",
    )
    providers = build_llm_providers(llm)
    monitor = monitor_for(llm, providers, lambda: {"inference": INFERENCE})
    gateway, sleeps, registry = hybrid(llm, providers, monitor)
    caplog.set_level(logging.INFO, logger="queries.gateway")
    try:
        report = await monitor.start()
        # the fallback provider is read from the environment and shown by the health check
        assert report["status"] == HEALTHY
        assert report["fallback_configured"] is True and report["fallback_provider"] == "openrouter"
        assert report["fallback_by_usage_type"] == {"inference": True}

        result = await gateway.complete("inference", INFERENCE, ask(), "inference")
    finally:
        await close(providers, monitor)
    # WHEN Ollama returns OOM THEN the system catches it AND retries on the fallback provider
    paths = [r["path"] for r in server.requests if r["path"] not in ("/api/tags", "/api/ps")]
    assert paths == ["/api/chat", "/chat/completions"]
    assert server.requests[-1]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert result.data == ANSWER and result.model_used == GEMINI
    assert result.attempts[0].reason == "oom" and sleeps.calls == []  # at once
    # AND the response includes the source provider in its metadata
    assert result.metadata()["provider"] == "openrouter"
    # AND the fallback event is logged with its metadata (query size, error type)
    assert "out of memory model=llama3.1:8b provider=ollama" in caplog.text
    assert "query_tokens~" in caplog.text and "error_type=OutOfMemory" in caplog.text
    assert f"from_model={LLAMA} to_model={GEMINI} reason=oom" in caplog.text
    labels = {"endpoint": "inference", "from_model": LLAMA, "to_model": GEMINI, "reason": "oom"}
    assert registry.get_sample_value("chat_model_fallback_count_total", labels) == 1


@pytest.mark.spec("LLM-34.4")
def test_fallback_provider_configuration_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # THEN it reads INFERENCE_FALLBACK_PROVIDER (groq|openrouter) AND its API key
    groq = settings(monkeypatch, INFERENCE_FALLBACK_PROVIDER="groq", GROQ_API_KEY="gsk-x")
    assert groq.inference_fallback() == ChainEntry("llama-3.1-8b-instant", "groq", 1)
    chosen = settings(
        monkeypatch,
        INFERENCE_FALLBACK_PROVIDER="openrouter",
        INFERENCE_FALLBACK_MODEL="qwen/qwen3-4b:free",
        OPENROUTER_API_KEY=KEY,
    )
    assert GatewayConfig(**chosen.gateway_options()).inference_fallback == ChainEntry(
        "qwen/qwen3-4b:free", "openrouter", 1
    )
    # AND without its key the fallback is not configured: a warning, and the service goes on
    caplog.set_level(logging.WARNING, logger="adapters.llm.settings")
    keyless = settings(monkeypatch, INFERENCE_FALLBACK_PROVIDER="groq")
    assert keyless.inference_fallback() is None
    assert "INFERENCE_FALLBACK_PROVIDER=groq but GROQ_API_KEY is not set" in caplog.text
    assert settings(monkeypatch).inference_fallback() is None
    with pytest.raises(ValidationError, match="groq"):
        settings(monkeypatch, INFERENCE_FALLBACK_PROVIDER="anthropic")


async def test_without_a_fallback_the_health_check_says_so_and_warns(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server.on("/api/tags", tags(LLAMA, EMBED))
    server.on("/api/ps", ps())
    llm = settings(monkeypatch, OLLAMA_BASE_URL=server.url, INFERENCE_FALLBACK_PROVIDER="groq")
    providers = build_llm_providers(llm)
    monitor = monitor_for(llm, providers, lambda: {"inference": INFERENCE})
    caplog.set_level(logging.WARNING)
    try:
        report = await monitor.start()
    finally:
        await close(providers, monitor)
    assert report["fallback_configured"] is False and report["fallback_provider"] is None
    assert "No fallback past Ollama is configured" in caplog.text


@pytest.mark.spec("LLM-01.2")
async def test_completion_checks_health_uses_the_quantized_model_and_falls_back_on_timeout(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    quantized = f"{LLAMA}-q4_0"
    server.on("/api/tags", tags(quantized, EMBED), tags(EMBED))
    server.on("/api/ps", ps())
    server.on(quantized, ollama_says(json.dumps(ANSWER), quantized), Reply(hang=5.0, body=b"{}"))
    server.on(GEMINI, chat_ok(json.dumps(ANSWER), model=GEMINI))
    llm = settings(
        monkeypatch,
        OLLAMA_BASE_URL=server.url,
        OPENROUTER_BASE_URL=server.url,
        OPENROUTER_API_KEY=KEY,
        OLLAMA_USE_QUANTIZED="true",
    )
    providers = build_llm_providers(llm)
    chain = [ChainEntry(LLAMA, "ollama", 1), ChainEntry(GEMINI, "openrouter", 2)]
    monitor = monitor_for(llm, providers, lambda: {"inference": chain})
    gateway, sleeps, _ = hybrid(
        llm, providers, monitor, default_timeout=0.3, unavailable_cooldown=0
    )
    try:
        # THEN it checks Ollama health before the request ...
        assert (await monitor.check())["status"] == HEALTHY
        # AND calls Ollama when healthy, with the quantized variant configured
        first = await gateway.complete("inference", chain, ask(), "inference")
        assert (first.provider, first.data) == ("ollama", ANSWER)
        [chat] = [r for r in server.requests if r["path"] == "/api/chat"]
        assert chat["body"]["model"] == quantized
        # AND it receives the completion within the timeout, or falls back on a timeout
        started = time.perf_counter()
        second = await gateway.complete("inference", chain, ask(), "inference")
        assert time.perf_counter() - started < 3.0
        assert second.provider == "openrouter" and second.attempts[0].reason == "timeout"
        assert second.attempts[0].error == "Timeout after 0.3s" and sleeps.calls == [2.0]
        # a model gone from Ollama (degraded health): the request goes to the fallback first
        assert (await monitor.check())["status"] != HEALTHY
        third = await gateway.complete("inference", chain, ask(), "inference")
        assert third.provider == "openrouter" and third.attempts[0].reason == "unhealthy"
        assert server.calls(quantized) == 2
    finally:
        await close(providers, monitor)


@pytest.mark.spec("LLM-05.2")
async def test_ollama_timeouts_are_retried_three_times_2_4_8_s_then_the_error(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server.on("/api/tags", tags(LLAMA, EMBED))
    server.on("/api/ps", ps())
    server.on(LLAMA, Reply(hang=5.0, body=b"{}"))
    llm = settings(monkeypatch, OLLAMA_BASE_URL=server.url)
    providers = build_llm_providers(llm)
    monitor = monitor_for(llm, providers, lambda: {"inference": INFERENCE})
    gateway, sleeps, registry = hybrid(llm, providers, monitor, default_timeout=0.2)
    caplog.set_level(logging.WARNING, logger="queries.gateway")
    try:
        with pytest.raises(AllModelsFailed) as caught:
            await gateway.complete("inference", INFERENCE, ask(), "inference")
    finally:
        await close(providers, monitor)
    # THEN it retries up to 3 times AND uses exponential backoff (2s, 4s, 8s)
    assert server.calls(LLAMA) == 4 and sleeps.calls == [2.0, 4.0, 8.0]
    # AND it logs timeout details (model, endpoint, timeout value)
    assert caplog.text.count(f"timeout model={LLAMA} endpoint=inference") == 4
    assert "timeout=0.2s" in caplog.text and "retry 3 of 3 in 8.0s" in caplog.text
    labels = {"endpoint": "inference", "model": LLAMA}
    assert registry.get_sample_value("chat_timeout_count_total", labels) == 4
    # AND it returns an error to the user after the retries are exhausted (the 503 body)
    body = caught.value.body()
    assert [a["error"] for a in body["attempts"]] == ["Timeout after 0.2s"] * 4
    assert body["retry_after"] == 120


@pytest.mark.spec("LLM-13.4")
async def test_an_ollama_completion_answers_in_time_and_a_refused_connection_is_handled(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.on(LLAMA, ollama_says('{"answer": "stg_orders"}'))
    llm = settings(monkeypatch, OLLAMA_BASE_URL=server.url)
    providers = build_llm_providers(llm)
    gateway = Gateway(providers, registry=CollectorRegistry())
    started = time.perf_counter()
    result = await gateway.complete("inference", INFERENCE, ask(), "inference")
    # THEN it calls the Ollama API AND uses llama3.1:8b AND receives the completion in time
    assert time.perf_counter() - started < 10.0
    assert server.requests[0]["path"] == "/api/chat"
    assert server.requests[0]["body"]["model"] == LLAMA
    assert result.data == {"answer": "stg_orders"} and result.provider == "ollama"
    await providers["ollama"].aclose()

    # AND it handles connection errors gracefully: an error a person can act on, no crash
    with ScriptedServer() as gone:
        url = gone.url
    refused = Gateway({"ollama": OllamaProvider(url)}, registry=CollectorRegistry())
    with pytest.raises(AllModelsFailed) as caught:
        await refused.complete("inference", INFERENCE, ask(), "inference")
    assert caught.value.body()["attempts"][0]["error"] == f"Could not connect to ollama at {url}"


@pytest.mark.spec("LLM-05.3")
async def test_ollama_lost_at_run_time_degrades_serves_cached_and_recovers(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from adapters.cache_store import MemoryStore
    from adapters.embedding_cache import CachingEmbedder
    from adapters.embedding_selection import EmbeddingUnavailable, OllamaEmbedder

    server.on("/api/tags", tags(LLAMA, EMBED), Reply(503, b"{}"), tags(LLAMA, EMBED))
    server.on("/api/ps", ps())
    server.on(EMBED, Reply(body=b'{"embeddings": [[0.6, 0.8]]}'), Reply(503, b"{}"))
    server.on(LLAMA, ollama_says(json.dumps(ANSWER)), Reply(503, b"{}"), ollama_says("{}"))
    llm = settings(monkeypatch, OLLAMA_BASE_URL=server.url)
    providers = build_llm_providers(llm)
    monitor = monitor_for(llm, providers, lambda: {"inference": INFERENCE})
    gateway, _, _ = hybrid(llm, providers, monitor, unavailable_cooldown=0)
    embedder = CachingEmbedder(OllamaEmbedder(server.url, EMBED, dimension=2), MemoryStore())
    try:
        assert (await monitor.check())["status"] == HEALTHY
        assert (await gateway.complete("inference", INFERENCE, ask(), "inference")).data
        cached = embedder.embed(["orders"])

        # WHEN Ollama becomes unavailable THEN the health check shows degraded status
        assert (await monitor.check())["status"] == UNAVAILABLE
        assert health_component(monitor)["status"] == "degraded"
        # AND cached results are used when available
        assert embedder.embed(["orders"]) == cached
        # AND new requests return an informative error
        with pytest.raises(EmbeddingUnavailable, match="HTTP 503"):
            embedder.embed(["customers"])
        with pytest.raises(AllModelsFailed) as caught:
            await gateway.complete("inference", INFERENCE, ask(), "inference")
        assert caught.value.body()["attempts"][0]["error"] == "Service unavailable (503)"

        # AND the system recovers by itself once Ollama answers again
        assert (await monitor.check())["status"] == HEALTHY
        assert health_component(monitor)["status"] == "ok"
        assert (await gateway.complete("inference", INFERENCE, ask(), "inference")).data == {}
    finally:
        await close(providers, monitor)


class _NoConfigs:
    def fallback_chain(self, usage_type: str) -> list[dict[str, Any]]:
        return []


@pytest.mark.spec("LLM-13.3")
async def test_start_up_checks_the_configured_ollama_and_fails_fast_with_a_clear_error(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from adapters.bootstrap import build_ollama_health

    server.on("/api/tags", tags(LLAMA, EMBED))
    server.on("/api/ps", ps())
    # THEN it connects to Ollama at the configured address (OLLAMA_BASE_URL, e.g.
    # http://host.docker.internal:11434 from a container) AND validates it is accessible
    llm = settings(monkeypatch, OLLAMA_BASE_URL=server.url, OLLAMA_HEALTH_INTERVAL="3600")
    providers = build_llm_providers(llm)
    monitor = build_ollama_health(llm, providers, _NoConfigs())
    try:
        report = await monitor.start()
    finally:
        await close(providers, monitor)
    assert report["base_url"] == server.url and report["status"] == HEALTHY
    assert [r["path"] for r in server.requests] == ["/api/tags", "/api/ps"]

    # AND it fails fast with a clear error if Ollama is not running (the service goes on)
    with ScriptedServer() as gone:
        url = gone.url
    llm = settings(monkeypatch, OLLAMA_BASE_URL=url, OLLAMA_HEALTH_INTERVAL="3600")
    providers = build_llm_providers(llm)
    monitor = build_ollama_health(llm, providers, _NoConfigs())
    caplog.set_level(logging.ERROR, logger="queries.ollama_health")
    started = time.perf_counter()
    try:
        down = await monitor.start()
    finally:
        await close(providers, monitor)
    assert time.perf_counter() - started < 2.0
    assert down["status"] == UNAVAILABLE and down["error"].startswith(f"Ollama at {url}")
    [error] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert f"Ollama is not available at {url}" in error and "ollama serve" in error
