"""The Ollama health monitor against a scripted Ollama on 127.0.0.1: healthy, missing models,
not running (a closed port), slow, quantized variant present and absent, memory and the safe
context window, the background refresh, `GET /health/ollama`, and the gateway's health hook."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from adapters.llm.ollama import OllamaProvider
from api.routes import ollama_health as ollama_routes
from domain.llm import ChainEntry, ChatMessage, Completion, CompletionRequest
from queries.gateway import Gateway, GatewayConfig
from queries.ollama_health import (
    DEGRADED,
    HEALTHY,
    UNAVAILABLE,
    OllamaHealthConfig,
    OllamaHealthMonitor,
    fallback_configured,
    health_component,
    required_variant,
)

pytestmark = pytest.mark.integration

GB = 1024**3
LLAMA = "llama3.1:8b"
EMBED = "nomic-embed-text"
GEMINI = "google/gemini-2.0-flash-exp:free"
FIELDS = ("status", "memory_available_mb", "models_loaded", "fallback_configured")


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    hang: float = 0.0


def tags(*names: str, size: int = 4 * GB) -> Reply:
    return Reply(body={"models": [{"name": n, "model": n, "size": size} for n in names]})


def ps(*loaded: tuple[str, int, int]) -> Reply:
    return Reply(
        body={
            "models": [
                {"name": n, "model": n, "size": size, "size_vram": vram} for n, size, vram in loaded
            ]
        }
    )


class ScriptedOllama:
    """`/api/tags`, `/api/ps` and `/api/chat` from a script (per path; the last reply repeats)."""

    def __init__(self) -> None:
        self.script: dict[str, list[Reply]] = {}
        self.requests: list[tuple[str, Any]] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                server.answer(self, None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                server.answer(self, json.loads(self.rfile.read(length) or b"{}"))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def on(self, path: str, *replies: Reply) -> None:
        self.script[path] = list(replies)

    def calls(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == path)

    def answer(self, handler: BaseHTTPRequestHandler, body: Any) -> None:
        self.requests.append((handler.path, body))
        replies = self.script.get(handler.path) or [Reply(404, {"error": "no script"})]
        reply = replies.pop(0) if len(replies) > 1 else replies[0]
        if reply.hang and self.stopping.wait(reply.hang):
            return
        payload = json.dumps(reply.body).encode()
        try:
            handler.send_response(reply.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def __enter__(self) -> ScriptedOllama:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def ollama() -> Iterator[ScriptedOllama]:
    with ScriptedOllama() as server:
        yield server


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def chains(*extra: ChainEntry) -> dict[str, list[ChainEntry]]:
    return {
        "embedding": [ChainEntry(EMBED, "ollama", 1)],
        "inference": [ChainEntry(LLAMA, "ollama", 1), *extra],
    }


def config(**kwargs: Any) -> OllamaHealthConfig:
    kwargs.setdefault("memory_budget_mb", 16384.0)
    kwargs.setdefault("timeout_s", 2.0)
    return OllamaHealthConfig(**kwargs)


async def get_health(monitor: OllamaHealthMonitor | None, query: str = "") -> httpx.Response:
    web = FastAPI()
    web.include_router(ollama_routes.router)
    web.state.container = SimpleNamespace(ollama_health=monitor)
    transport = httpx.ASGITransport(app=web)
    async with httpx.AsyncClient(transport=transport, base_url="http://upstream") as client:
        return await client.get(f"/health/ollama{query}")


@pytest.mark.spec("LLM-01.4", "LLM-01.1")
async def test_healthy_report_and_endpoint(ollama: ScriptedOllama) -> None:
    ollama.on("/api/tags", tags(LLAMA, f"{EMBED}:latest"))
    ollama.on("/api/ps", ps((LLAMA, 5 * GB, 5 * GB)))
    entries = chains(ChainEntry(GEMINI, "openrouter", 2))
    monitor = OllamaHealthMonitor(ollama.url, [LLAMA, EMBED], config(), chains=lambda: entries)
    try:
        report = await monitor.check()
        # THEN it connects to Ollama at the configured address AND validates it is accessible
        # AND it checks available memory and model status.
        assert report["base_url"] == ollama.url and report["error"] is None
        assert ollama.calls("/api/tags") == 1 and ollama.calls("/api/ps") == 1
        assert report["status"] == HEALTHY and report["reasons"] == []
        # AND memory_available_mb estimate: the 16 GB budget minus the 5 GB loaded model.
        assert report["memory_available_mb"] == 16384 - 5120
        assert report["memory_source"] == "configured_budget"
        # AND models_loaded list; AND fallback_configured boolean.
        assert report["models_loaded"] == [LLAMA]
        assert report["models_loaded_detail"] == [
            {"name": LLAMA, "size_mb": 5120.0, "size_vram_mb": 5120.0}
        ]
        assert report["fallback_configured"] is True
        assert report["fallback_by_usage_type"] == {"inference": True}
        assert report["missing_models"] == [] and report["pull_commands"] == []
        assert monitor.provider_health("ollama") and monitor.provider_health("openrouter")

        # WHEN /health/ollama is called THEN it returns the status and the fields (200).
        response = await get_health(monitor)
        assert response.status_code == 200
        body = response.json()
        assert {k: body[k] for k in FIELDS} == {k: report[k] for k in FIELDS}
        assert body["refresh_interval_s"] == 30.0  # AND it updates every 30 seconds
        assert ollama.calls("/api/tags") == 1  # served from the monitor, not a new check
        refreshed = (await get_health(monitor, "?refresh=true")).json()
        assert refreshed["status"] == HEALTHY and ollama.calls("/api/tags") == 2
    finally:
        await monitor.stop()


async def test_fallback_not_configured_when_ollama_chain_has_nothing_after_it(
    ollama: ScriptedOllama, caplog: pytest.LogCaptureFixture
) -> None:
    ollama.on("/api/tags", tags(LLAMA, EMBED))
    ollama.on("/api/ps", ps())
    monitor = OllamaHealthMonitor(ollama.url, [LLAMA, EMBED], config(), chains=lambda: chains())
    caplog.set_level(logging.WARNING, logger="queries.ollama_health")
    try:
        report = await monitor.start()
        assert report["fallback_configured"] is False
        assert any("No fallback past Ollama" in r.getMessage() for r in caplog.records)
    finally:
        await monitor.stop()
    assert fallback_configured({"chat_deep": [ChainEntry(GEMINI, "openrouter", 1)]})
    assert not fallback_configured({"embedding": [ChainEntry(EMBED, "ollama", 1)]})


@pytest.mark.spec("LLM-01.3")
async def test_missing_models_are_listed_with_pull_commands(
    ollama: ScriptedOllama, caplog: pytest.LogCaptureFixture
) -> None:
    ollama.on("/api/tags", tags("qwen2.5:7b"))
    ollama.on("/api/ps", ps())
    monitor = OllamaHealthMonitor(ollama.url, [LLAMA, EMBED], config(interval_s=3600))
    caplog.set_level(logging.INFO, logger="queries.ollama_health")
    try:
        # WHEN the system starts THEN it checks llama3.1:8b AND nomic-embed-text are available.
        report = await monitor.start()
        assert report["status"] == DEGRADED
        assert [m["model"] for m in report["missing_models"]] == [LLAMA, EMBED]
        # AND the error message includes `ollama pull` commands.
        assert report["pull_commands"] == [f"ollama pull {LLAMA}", f"ollama pull {EMBED}"]
        assert report["missing_models"][0]["pull"] == f"ollama pull {LLAMA}"
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1
        message = errors[0].getMessage()
        assert "lacks required models" in message  # AND a clear error message
        assert f"ollama pull {LLAMA}" in message and f"ollama pull {EMBED}" in message
        assert monitor.running  # the service keeps running, degraded
        assert not monitor.provider_health("ollama")
    finally:
        await monitor.stop()
    assert not monitor.running


@pytest.mark.spec("LLM-05.1", "LLM-01.1")
async def test_ollama_not_running_is_logged_and_reported_without_crashing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = closed_port_url()
    monitor = OllamaHealthMonitor(url, [LLAMA, EMBED], config(interval_s=3600))
    caplog.set_level(logging.INFO, logger="queries.ollama_health")
    try:
        started = time.perf_counter()
        report = await monitor.start()  # AND the system does not crash
        assert time.perf_counter() - started < 1.0  # it fails fast with a clear error
        assert report["status"] == UNAVAILABLE
        assert report["error"].startswith(f"Ollama at {url} is not reachable")
        assert report["memory_available_mb"] is None and report["models_loaded"] == []
        # THEN the system logs a clear error message AND it includes troubleshooting steps.
        [error] = [r for r in caplog.records if r.levelno == logging.ERROR]
        message = error.getMessage()
        assert "Ollama is not available" in message and "ollama serve" in message
        assert "OLLAMA_BASE_URL" in message and f"ollama pull {LLAMA}" in message
        assert any("ollama serve" in step for step in report["troubleshooting"])
        # AND the health check endpoint shows degraded status.
        assert health_component(monitor)["status"] == "degraded"
        response = await get_health(monitor)
        assert response.status_code == 200 and response.json()["status"] == UNAVAILABLE
        assert not monitor.provider_health("ollama")
    finally:
        await monitor.stop()


async def test_endpoint_without_a_monitor() -> None:
    response = await get_health(None)
    assert response.status_code == 200
    assert response.json()["status"] == UNAVAILABLE and health_component(None)["status"] == "ok"


async def test_slow_ollama_is_unavailable_after_the_check_timeout(ollama: ScriptedOllama) -> None:
    ollama.on("/api/tags", Reply(body={"models": []}, hang=5.0))
    monitor = OllamaHealthMonitor(ollama.url, [LLAMA], config(timeout_s=0.3))
    try:
        started = time.perf_counter()
        report = await monitor.check()
        assert time.perf_counter() - started < 2.0
        assert report["status"] == UNAVAILABLE
        assert "did not answer within 0.3 s" in report["error"]
    finally:
        await monitor.stop()


async def test_slow_or_failing_ps_only_degrades(ollama: ScriptedOllama) -> None:
    ollama.on("/api/tags", tags(LLAMA, EMBED))
    ollama.on("/api/ps", Reply(500, {"error": "boom"}))
    monitor = OllamaHealthMonitor(ollama.url, [LLAMA, EMBED], config())
    try:
        report = await monitor.check()
        assert report["status"] == DEGRADED
        assert any("/api/ps" in reason for reason in report["reasons"])
    finally:
        await monitor.stop()


@pytest.mark.spec("LLM-35.2")
async def test_quantized_variant_present(ollama: ScriptedOllama) -> None:
    ollama.on("/api/tags", tags(f"{LLAMA}-instruct-q4_0", f"{EMBED}:latest"))
    ollama.on("/api/ps", ps())
    cfg = config(use_quantized=True)
    monitor = OllamaHealthMonitor(ollama.url, [LLAMA, EMBED], cfg)
    try:
        report = await monitor.check()
        # THEN it uses the quantized variant (e.g. llama3.1:8b-q4_0) AND validates it exists.
        assert report["required_models"] == [f"{LLAMA}-q4_0", EMBED]
        variant = f"{LLAMA}-instruct-q4_0"
        assert report["quantized_models"] == {LLAMA: variant, EMBED: f"{EMBED}:latest"}
        assert report["status"] == HEALTHY
        assert monitor.resolve_model(LLAMA) == variant  # the name to call for llama3.1:8b
        assert monitor.resolve_model(EMBED) == f"{EMBED}:latest"
        # AND the health check shows quantization status.
        assert report["quantized"] is True and report["quantization"] == "q4_0"
        body = (await get_health(monitor)).json()
        assert body["quantized"] is True and body["quantization"] == "q4_0"
    finally:
        await monitor.stop()


@pytest.mark.spec("LLM-35.2", "LLM-01.3")
async def test_quantized_variant_absent(ollama: ScriptedOllama) -> None:
    ollama.on("/api/tags", tags(LLAMA, EMBED))  # only the unquantized llama
    ollama.on("/api/ps", ps())
    monitor = OllamaHealthMonitor(ollama.url, [LLAMA, EMBED], config(use_quantized=True))
    try:
        report = await monitor.check()
        # AND it validates quantized models if OLLAMA_USE_QUANTIZED=true.
        assert report["status"] == DEGRADED
        assert report["pull_commands"] == [f"ollama pull {LLAMA}-q4_0"]
        assert report["quantized_models"] == {LLAMA: None, EMBED: EMBED}
        assert monitor.resolve_model(LLAMA) == f"{LLAMA}-q4_0"
    finally:
        await monitor.stop()
    pinned = required_variant("llama3.1:8b-instruct-q8_0", config(use_quantized=True))
    assert pinned.required == "llama3.1:8b-instruct-q8_0"
    assert required_variant("mistral", config(use_quantized=True)).required == "mistral:q4_0"
    assert required_variant(LLAMA, config()).required == LLAMA


@pytest.mark.spec("LLM-35.4")
async def test_context_window_follows_memory_and_is_sent_per_request(
    ollama: ScriptedOllama, caplog: pytest.LogCaptureFixture
) -> None:
    ollama.on("/api/tags", tags(LLAMA, EMBED))
    ollama.on("/api/ps", ps((LLAMA, 5 * GB, 5 * GB)), ps((LLAMA, 5 * GB, 5 * GB)))
    ollama.on(
        "/api/chat",
        Reply(body={"model": LLAMA, "message": {"role": "assistant", "content": "ok"}}),
    )
    provider = OllamaProvider(ollama.url)
    cfg = config(memory_budget_mb=5120 + 1000, max_context_window=32768, min_context_window=512)
    monitor = OllamaHealthMonitor(provider, [LLAMA, EMBED], cfg)
    caplog.set_level(logging.INFO, logger="queries.ollama_health")
    try:
        report = await monitor.check()
        # THEN it calculates the safe context window: 1000 MB available * 0.6 = 600 MB of KV
        # cache at 0.125 MB a token = 4800 tokens, rounded down to 256 -> 4608.
        assert report["memory_available_mb"] == 1000.0
        assert report["context_window"] == monitor.context_window() == 4608
        # AND it adjusts the context window per request (num_ctx of the next chat call).
        request = CompletionRequest(messages=(ChatMessage("user", "hi"),), timeout=5.0)
        await provider.complete(request, LLAMA)
        [(_, body)] = [r for r in ollama.requests if r[0] == "/api/chat"]
        assert body["options"]["num_ctx"] == 4608
        # AND it logs context adjustments.
        assert any("context window None -> 4608" in r.getMessage() for r in caplog.records)
        assert report["status"] == DEGRADED  # 1000 MB < the 1024 MB minimum
        assert any("memory low" in reason for reason in report["reasons"])
    finally:
        await monitor.stop()
        await provider.aclose()
    assert monitor.safe_context_window(None) == 32768
    assert monitor.safe_context_window(100_000) == 32768
    assert monitor.safe_context_window(10) == 512


async def test_background_refresh_recovers_and_stops(
    ollama: ScriptedOllama, caplog: pytest.LogCaptureFixture
) -> None:
    ollama.on("/api/tags", Reply(503, {"error": "loading"}), Reply(503), tags(LLAMA, EMBED))
    ollama.on("/api/ps", ps())
    monitor = OllamaHealthMonitor(ollama.url, [LLAMA, EMBED], config(interval_s=0.05))
    caplog.set_level(logging.INFO, logger="queries.ollama_health")
    try:
        first = await monitor.start()
        assert first["status"] == UNAVAILABLE and "HTTP 503" in first["error"]
        for _ in range(100):
            if monitor.status == HEALTHY:
                break
            await asyncio.sleep(0.05)
        assert monitor.status == HEALTHY and monitor.checks >= 3
        assert monitor.provider_health("ollama")
        assert any("unavailable -> healthy" in r.getMessage() for r in caplog.records)
    finally:
        await monitor.stop()
    assert not monitor.running
    settled = ollama.calls("/api/tags")
    await asyncio.sleep(0.2)
    assert ollama.calls("/api/tags") == settled  # no more checks after stop()


class Recorder:
    """A provider that answers and remembers the models it was asked for."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.models: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    async def complete(self, request: CompletionRequest, model: str) -> Completion:
        self.models.append(model)
        return Completion("answer", model, self._name)

    async def stream(self, request: CompletionRequest, model: str) -> Any:
        yield "answer"

    async def embed(self, texts: Any, model: str) -> list[list[float]]:
        return []

    async def aclose(self) -> None:
        return None


@pytest.mark.spec("LLM-34.1")
async def test_gateway_routes_past_ollama_while_health_is_degraded(
    ollama: ScriptedOllama,
) -> None:
    ollama.on("/api/tags", tags(EMBED), tags(LLAMA, EMBED))  # llama missing, then pulled
    ollama.on("/api/ps", ps())
    monitor = OllamaHealthMonitor(ollama.url, [LLAMA, EMBED], config())
    local, cloud = Recorder("ollama"), Recorder("openrouter")
    gateway = Gateway(
        {"ollama": local, "openrouter": cloud},
        config=GatewayConfig(base_delay=0),
        provider_health=monitor.provider_health,
    )
    chain = [ChainEntry(LLAMA, "ollama", 1), ChainEntry(GEMINI, "openrouter", 2)]
    request = CompletionRequest(messages=(ChatMessage("user", "what feeds x?"),))
    try:
        # THEN it checks Ollama health status (memory available, model loaded) ...
        assert (await monitor.check())["status"] == DEGRADED
        # AND if health is degraded, route to the fallback provider.
        result = await gateway.complete("inference", chain, request, "inference")
        assert result.provider == "openrouter" and local.models == []
        assert result.attempts[0].reason == "unhealthy"
        # AND if health is good and tokens < 3000, route to Ollama.
        assert (await monitor.check())["status"] == HEALTHY
        result = await gateway.complete("inference", chain, request, "inference")
        assert result.provider == "ollama" and local.models == [LLAMA]
        # AND tokens >= 3000 go to the fallback even while healthy.
        big = CompletionRequest(messages=(ChatMessage("user", "x" * 13_000),))
        result = await gateway.complete("inference", chain, big, "inference")
        assert result.provider == "openrouter" and result.attempts[0].reason == "context_too_large"
    finally:
        await monitor.stop()
