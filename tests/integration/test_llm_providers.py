"""The real provider adapters and the gateway against a scripted HTTP server on 127.0.0.1.

The server answers per model (the `model` of the JSON body, or the path for GETs) from a
script: 200, 429 with and without Retry-After, 503, a hang past the timeout, malformed and
non-JSON bodies, `<think>` output, SSE and NDJSON streams.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from adapters.llm.ollama import OllamaProvider
from adapters.llm.openai_compatible import OpenAICompatibleProvider
from adapters.llm.settings import LLMSettings, build_llm_providers
from domain.llm import (
    AllModelsFailed,
    ChainEntry,
    ChatMessage,
    CompletionRequest,
    MalformedResponse,
    OutOfMemory,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from queries.gateway import Gateway, GatewayConfig

pytestmark = pytest.mark.integration

SECRET = "sk-or-v1-TESTSECRET-0123456789abcdef"
ANSWER = {
    "answer": "stg_orders feeds customer_summary",
    "evidence": [],
    "next_actions": [],
    "warnings": [],
}


@dataclass
class Reply:
    status: int = 200
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] | None = None  # streamed one by one, flushed
    chunk_delay: float = 0.0
    hang: float = 0.0  # seconds to wait before answering
    echo_auth: bool = False  # put the request's Authorization header in the body


def chat_ok(text: str, model: str = "m") -> Reply:
    return Reply(
        body=json.dumps(
            {
                "id": "x",
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 21, "completion_tokens": 9},
            }
        ).encode()
    )


def sse(*deltas: str, comment: bool = True) -> Reply:
    events = [b": OPENROUTER PROCESSING\n\n"] if comment else []
    for d in deltas:
        event = {"choices": [{"index": 0, "delta": {"content": d}}]}
        events.append(f"data: {json.dumps(event)}\n\n".encode())
    events.append(
        b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}\n\n'
    )
    events.append(b"data: [DONE]\n\n")
    return Reply(headers={"Content-Type": "text/event-stream"}, chunks=events)


def ndjson(*deltas: str) -> Reply:
    lines = [
        json.dumps(
            {"model": "llama3.1:8b", "message": {"role": "assistant", "content": d}, "done": False}
        )
        for d in deltas
    ]
    lines.append(
        json.dumps(
            {
                "model": "llama3.1:8b",
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "prompt_eval_count": 12,
                "eval_count": 4,
            }
        )
    )
    return Reply(
        headers={"Content-Type": "application/x-ndjson"},
        chunks=[(line + "\n").encode() for line in lines],
    )


class ScriptedServer:
    """A real HTTP server in a thread; `script[key]` is a list of replies (the last repeats)."""

    def __init__(self) -> None:
        self.script: dict[str, list[Reply]] = {}
        self.requests: list[dict[str, Any]] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                server.answer(self, None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                server.answer(self, json.loads(raw or b"{}"))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def on(self, key: str, *replies: Reply) -> None:
        self.script[key] = list(replies)

    def answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any] | None) -> None:
        key = str(body.get("model")) if body and "model" in body else handler.path
        self.requests.append(
            {
                "path": handler.path,
                "body": body,
                "key": key,
                "headers": dict(handler.headers.items()),
            }
        )
        replies = self.script.get(key) or [Reply(404, b'{"error": "no script"}')]
        reply = replies.pop(0) if len(replies) > 1 else replies[0]
        if reply.hang and self.stopping.wait(reply.hang):
            return
        payload = reply.body or b""
        if reply.echo_auth:
            payload += handler.headers.get("Authorization", "").encode()
        try:
            handler.send_response(reply.status)
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            if reply.chunks is None:
                handler.send_header("Content-Length", str(len(payload)))
                handler.end_headers()
                handler.wfile.write(payload)
                return
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            for chunk in reply.chunks:
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
                if reply.chunk_delay:
                    time.sleep(reply.chunk_delay)
            handler.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def calls(self, key: str) -> int:
        return sum(1 for r in self.requests if r["key"] == key)

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def req(**kwargs: Any) -> CompletionRequest:
    kwargs.setdefault("response_format", "json_object")
    kwargs.setdefault("timeout", 5.0)
    return CompletionRequest(
        messages=(ChatMessage("system", "Answer in JSON."), ChatMessage("user", "what feeds x?")),
        **kwargs,
    )


def openrouter(server: ScriptedServer, key: str | None = SECRET) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider("openrouter", server.url, api_key=key)


# --- the OpenAI-compatible adapter -------------------------------------------------------


@pytest.mark.spec("CFG-07.2")
async def test_openai_compatible_completion_sends_json_mode_bearer_and_parameters(
    server: ScriptedServer,
) -> None:
    server.on("m", chat_ok(json.dumps(ANSWER)))
    provider = openrouter(server)
    try:
        completion = await provider.complete(req(temperature=0.6, max_tokens=512), "m")
    finally:
        await provider.aclose()
    assert json.loads(completion.text) == ANSWER
    assert (completion.provider, completion.prompt_tokens, completion.completion_tokens) == (
        "openrouter",
        21,
        9,
    )
    sent = server.requests[0]
    assert sent["path"] == "/chat/completions"
    assert sent["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert sent["body"]["response_format"] == {"type": "json_object"}
    assert (sent["body"]["temperature"], sent["body"]["max_tokens"]) == (0.6, 512)
    assert sent["body"]["messages"][0] == {"role": "system", "content": "Answer in JSON."}


async def test_json_schema_response_format(server: ScriptedServer) -> None:
    schema = {
        "title": "chat answer",
        "type": "object",
        "required": ["answer"],
        "properties": {"answer": {"type": "string"}},
    }
    server.on("m", chat_ok('{"answer": "x"}'))
    provider = openrouter(server)
    await provider.complete(req(response_format=schema), "m")
    await provider.aclose()
    sent = server.requests[0]["body"]["response_format"]
    assert sent == {
        "type": "json_schema",
        "json_schema": {"name": "chat_answer", "schema": schema, "strict": True},
    }


async def test_status_codes_map_to_typed_errors(server: ScriptedServer) -> None:
    server.on("limited", Reply(429, b'{"error": "slow down"}', {"Retry-After": "7"}))
    server.on("limited-no-header", Reply(429, b'{"error": "slow down"}'))
    server.on("limited-date", Reply(429, b"", {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}))
    server.on("down", Reply(503, b"<html>maintenance</html>"))
    server.on("gateway", Reply(502, b"bad gateway"))
    server.on(
        "in-body",
        Reply(
            200,
            json.dumps(
                {"error": {"code": 429, "message": "Rate limit exceeded: free-models-per-min"}}
            ).encode(),
        ),
    )
    server.on("not-json", Reply(200, b"<html>oops</html>"))
    server.on("truncated", Reply(200, b'{"choices": [{"message": {"content": "x"'))
    server.on("no-choices", Reply(200, b'{"id": "x"}'))
    provider = openrouter(server)
    try:
        with pytest.raises(RateLimited) as limited:
            await provider.complete(req(), "limited")
        assert limited.value.retry_after == 7.0 and limited.value.status == 429
        with pytest.raises(RateLimited) as bare:
            await provider.complete(req(), "limited-no-header")
        assert bare.value.retry_after is None
        with pytest.raises(RateLimited) as dated:
            await provider.complete(req(), "limited-date")
        assert dated.value.retry_after == 0.0  # a date in the past
        for model in ("down", "gateway"):
            with pytest.raises(ProviderUnavailable):
                await provider.complete(req(), model)
        with pytest.raises(RateLimited):
            await provider.complete(req(), "in-body")
        for model in ("not-json", "truncated", "no-choices"):
            with pytest.raises(MalformedResponse) as bad:
                await provider.complete(req(), model)
            assert bad.value.raw  # kept for DEBUG logs
            assert bad.value.raw not in bad.value.message
    finally:
        await provider.aclose()


async def test_hang_past_the_timeout_is_a_timeout(server: ScriptedServer) -> None:
    server.on("slow", Reply(hang=5.0, body=b"{}"))
    provider = openrouter(server)
    started = time.perf_counter()
    with pytest.raises(ProviderTimeout) as caught:
        await provider.complete(req(timeout=0.3), "slow")
    await provider.aclose()
    assert time.perf_counter() - started < 2.0
    assert caught.value.message == "Timeout after 0.3s"


async def test_connection_refused_is_unavailable() -> None:
    with ScriptedServer() as gone:
        url = gone.url
    provider = OpenAICompatibleProvider("openai_compatible", url)
    with pytest.raises(ProviderUnavailable) as caught:
        await provider.complete(req(), "m")
    await provider.aclose()
    assert "Could not connect" in caught.value.message


async def test_sse_stream_yields_deltas(server: ScriptedServer) -> None:
    server.on("m", sse("Hel", "lo", " world"))
    provider = openrouter(server)
    pieces = [p async for p in provider.stream(req(), "m")]
    await provider.aclose()
    assert pieces == ["Hel", "lo", " world"]
    assert server.requests[0]["body"]["stream"] is True


async def test_sse_error_event_and_garbage(server: ScriptedServer) -> None:
    server.on(
        "err",
        Reply(
            chunks=[
                b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n',
                b'data: {"error": {"code": 503, "message": "provider down"}}\n\n',
            ]
        ),
    )
    server.on("garbage", Reply(chunks=[b"data: {not json\n\n"]))
    server.on("limited", Reply(429, b"", {"Retry-After": "3"}))
    provider = openrouter(server)
    try:
        seen: list[str] = []
        with pytest.raises(ProviderUnavailable):
            async for piece in provider.stream(req(), "err"):
                seen.append(piece)
        assert seen == ["a"]
        with pytest.raises(MalformedResponse):
            _ = [p async for p in provider.stream(req(), "garbage")]
        with pytest.raises(RateLimited) as limited:
            _ = [p async for p in provider.stream(req(), "limited")]
        assert limited.value.retry_after == 3.0
    finally:
        await provider.aclose()


# --- the Ollama adapter ------------------------------------------------------------------


@pytest.mark.spec("CFG-07.3")
async def test_ollama_chat_stream_embed_tags_ps(server: ScriptedServer) -> None:
    server.on(
        "llama3.1:8b",
        Reply(
            body=json.dumps(
                {
                    "model": "llama3.1:8b",
                    "message": {"role": "assistant", "content": '{"answer": "x"}'},
                    "done": True,
                    "prompt_eval_count": 30,
                    "eval_count": 8,
                }
            ).encode()
        ),
        Reply(
            body=json.dumps(
                {
                    "model": "llama3.1:8b",
                    "message": {"role": "assistant", "content": '{"answer": "x"}'},
                    "done": True,
                    "prompt_eval_count": 30,
                    "eval_count": 8,
                }
            ).encode()
        ),
        ndjson("Hel", "lo"),
    )
    server.on("nomic-embed-text", Reply(body=b'{"embeddings": [[0.1, 0.2], [0.3, 0.4]]}'))
    server.on("/api/tags", Reply(body=b'{"models": [{"name": "llama3.1:8b", "size": 1}]}'))
    server.on("/api/ps", Reply(body=b'{"models": [{"name": "llama3.1:8b", "size_vram": 5}]}'))
    provider = OllamaProvider(server.url)
    try:
        gateway = Gateway({"ollama": provider}, registry=CollectorRegistry())
        configured = [
            ChainEntry("llama3.1:8b", "ollama", 1, {"temperature": 0.2, "max_tokens": 256})
        ]
        result = await gateway.complete("inference", configured, req(timeout=None), "inference")
        completion = await provider.complete(req(), "llama3.1:8b")
        pieces = [p async for p in provider.stream(req(), "llama3.1:8b")]
        vectors = await provider.embed(["a", "b"], "nomic-embed-text")
        tags = await provider.list_models()
        running = await provider.running_models()
    finally:
        await provider.aclose()
    assert result.model_used == "llama3.1:8b" and result.data == {"answer": "x"}
    assert completion.text == '{"answer": "x"}'
    assert (completion.prompt_tokens, completion.completion_tokens) == (30, 8)
    body = server.requests[0]["body"]
    assert server.requests[0]["path"] == "/api/chat"
    assert body["model"] == "llama3.1:8b" and body["format"] == "json"
    assert body["options"] == {"temperature": 0.2, "num_predict": 256}
    assert body["stream"] is False and server.requests[2]["body"]["stream"] is True
    assert pieces == ["Hel", "lo"]
    assert vectors == [[0.1, 0.2], [0.3, 0.4]]
    assert server.requests[3]["path"] == "/api/embed"
    assert server.requests[3]["body"] == {"model": "nomic-embed-text", "input": ["a", "b"]}
    assert tags[0]["name"] == "llama3.1:8b" and running[0]["size_vram"] == 5


async def test_ollama_errors(server: ScriptedServer) -> None:
    server.on(
        "big",
        Reply(
            500,
            b'{"error": "model requires more system memory (9.1 GiB) than is available (4.0 GiB)"}',
        ),
    )
    server.on(
        "stream-oom",
        Reply(
            chunks=[
                b'{"message": {"content": "a"}, "done": false}\n',
                b'{"error": "CUDA error: out of memory"}\n',
            ]
        ),
    )
    server.on("bad", Reply(200, b"not json at all"))
    provider = OllamaProvider(server.url)
    try:
        with pytest.raises(OutOfMemory):
            await provider.complete(req(), "big")
        with pytest.raises(OutOfMemory):
            _ = [p async for p in provider.stream(req(), "stream-oom")]
        with pytest.raises(MalformedResponse):
            await provider.complete(req(), "bad")
    finally:
        await provider.aclose()


# --- the gateway over the real adapters ---------------------------------------------------

R1, DEVSTRAL, GEMINI = (
    "deepseek/deepseek-r1-0528:free",
    "mistralai/devstral-2512:free",
    "google/gemini-2.0-flash-exp:free",
)


def gateway_for(providers: dict[str, Any], **cfg: Any) -> tuple[Gateway, CollectorRegistry]:
    registry = CollectorRegistry()
    config = GatewayConfig(
        **{"base_delay": 0.1, "backoff_factor": 2.0, "timeouts": {"deep": 0.5}, **cfg}
    )
    return Gateway(providers, config=config, registry=registry), registry


def greq(**kwargs: Any) -> CompletionRequest:
    """A request without its own timeout: the gateway's per-endpoint timeout applies."""
    return req(timeout=None, **kwargs)


def chain(*models: str, provider: str = "openrouter") -> list[ChainEntry]:
    return [ChainEntry(m, provider, i + 1) for i, m in enumerate(models)]


@pytest.mark.spec(
    "CFG-06.2", "CFG-06.3", "LLM-22.2", "LLM-22.3", "LLM-27.2", "LLM-27.3", "LLM-26.2"
)
async def test_gateway_walks_429_then_hang_then_think_json(
    server: ScriptedServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.on(R1, Reply(429, b'{"error": "rate"}', {"Retry-After": "0.3"}))
    server.on(DEVSTRAL, Reply(hang=5.0, body=b"{}"))
    server.on(GEMINI, chat_ok("<think>check the graph first</think>" + json.dumps(ANSWER)))
    provider = openrouter(server)
    gateway, registry = gateway_for({"openrouter": provider})
    caplog.set_level(logging.DEBUG)
    started = time.perf_counter()
    try:
        result = await gateway.complete(
            "chat_deep", chain(R1, DEVSTRAL, GEMINI), greq(), "/api/chat/deep"
        )
    finally:
        await provider.aclose()
    elapsed = time.perf_counter() - started
    # 0.3 s (Retry-After > 0.1 base delay) + 0.5 s timeout + 0.2 s (0.1 * 2^1) backoff
    assert 0.95 <= elapsed < 3.0
    assert result.data == ANSWER and result.model_used == GEMINI
    assert result.metadata() == {
        "model_used": GEMINI,
        "provider": "openrouter",
        "priority": 3,
        "fallback_count": 2,
    }
    assert result.server_metadata()["primary_error"] == "Rate limit exceeded (429)"
    assert [server.calls(m) for m in (R1, DEVSTRAL, GEMINI)] == [1, 1, 1]
    assert (
        registry.get_sample_value(
            "chat_timeout_count_total", {"endpoint": "/api/chat/deep", "model": DEVSTRAL}
        )
        == 1
    )
    assert (
        registry.get_sample_value(
            "chat_model_fallback_count_total",
            {
                "endpoint": "/api/chat/deep",
                "from_model": DEVSTRAL,
                "to_model": GEMINI,
                "reason": "timeout",
            },
        )
        == 1
    )
    assert any(
        "check the graph first" in r.getMessage() and r.levelno == logging.DEBUG
        for r in caplog.records
    )
    assert (
        registry.get_sample_value(
            "llm_prompt_tokens_total", {"provider": "openrouter", "model": GEMINI}
        )
        == 21
    )


@pytest.mark.spec("LLM-22.3", "CFG-06.2")
async def test_gateway_exhaustion_over_http(server: ScriptedServer) -> None:
    server.on(R1, Reply(503, b"down"))
    server.on(DEVSTRAL, Reply(200, b"<html>not json</html>"))
    server.on(GEMINI, chat_ok("I think the answer is stg_orders."))  # JSON required
    provider = openrouter(server)
    gateway, registry = gateway_for({"openrouter": provider})
    with pytest.raises(AllModelsFailed) as caught:
        await gateway.complete("chat_deep", chain(R1, DEVSTRAL, GEMINI), greq(), "/api/chat/deep")
    await provider.aclose()
    body = caught.value.body()
    assert body["retry_after"] == 120 and body["endpoint"] == "/api/chat/deep"
    assert [a["error"] for a in body["attempts"]] == [
        "Service unavailable (503)",
        "Malformed response (body is not JSON)",
        "Malformed response (not JSON (Expecting value at char 0))",
    ]
    assert "stg_orders" not in json.dumps(body) and "<html>" not in json.dumps(body)
    assert (
        registry.get_sample_value("chat_all_models_failed_total", {"endpoint": "/api/chat/deep"})
        == 1
    )
    assert (
        registry.get_sample_value(
            "chat_malformed_response_count_total", {"endpoint": "/api/chat/deep", "model": GEMINI}
        )
        == 1
    )


async def test_gateway_breaker_skips_rate_limited_model_over_http(server: ScriptedServer) -> None:
    server.on(R1, Reply(429, b"", {"Retry-After": "30"}))
    server.on(DEVSTRAL, chat_ok(json.dumps(ANSWER)))
    provider = openrouter(server)
    gateway, _ = gateway_for({"openrouter": provider}, max_delay=0.1)
    for _ in range(3):
        result = await gateway.complete("chat_deep", chain(R1, DEVSTRAL), greq(), "/api/chat/deep")
        assert result.model_used == DEVSTRAL
    await provider.aclose()
    assert server.calls(R1) == 1 and server.calls(DEVSTRAL) == 3


@pytest.mark.spec("LLM-34.2")
async def test_gateway_ollama_oom_then_openai_compatible(server: ScriptedServer) -> None:
    server.on("llama3.1:8b", Reply(500, b'{"error": "llama runner: out of memory"}'))
    server.on("qwen2.5", chat_ok(json.dumps(ANSWER), model="qwen2.5"))
    ollama = OllamaProvider(server.url)
    compatible = OpenAICompatibleProvider("openai_compatible", server.url)
    gateway, _ = gateway_for({"ollama": ollama, "openai_compatible": compatible})
    entries = [
        ChainEntry("llama3.1:8b", "ollama", 1),
        ChainEntry("qwen2.5", "openai_compatible", 2),
    ]
    started = time.perf_counter()
    result = await gateway.complete("inference", entries, greq(), "inference")
    await ollama.aclose()
    await compatible.aclose()
    assert result.provider == "openai_compatible" and result.attempts[0].reason == "oom"
    assert time.perf_counter() - started < 0.1 + 1.0  # no backoff after OOM


async def test_gateway_stream_falls_back_then_streams_sse_without_think(
    server: ScriptedServer,
) -> None:
    server.on(R1, Reply(503, b"down"))
    server.on(DEVSTRAL, sse("<think>plan", "</think>Hel", "lo"))
    provider = openrouter(server)
    gateway, _ = gateway_for({"openrouter": provider})
    stream = await gateway.stream("chat_deep", chain(R1, DEVSTRAL), greq(), "/api/chat/deep")
    text = "".join([p async for p in stream])
    await provider.aclose()
    assert stream.model_used == DEVSTRAL and text == "Hello"
    # the streamed text equals what the non-streaming path returns for the same output
    server.on(GEMINI, chat_ok("<think>plan</think>Hello"))
    provider2 = openrouter(server)
    gateway2, _ = gateway_for({"openrouter": provider2})
    whole = await gateway2.complete(
        "chat_deep", chain(GEMINI), greq(response_format=None), "/api/chat/deep"
    )
    await provider2.aclose()
    assert whole.text == text


async def test_gateway_stream_ndjson_and_slow_first_token(server: ScriptedServer) -> None:
    server.on("slow", Reply(hang=5.0, body=b""))
    server.on("llama3.1:8b", ndjson('{"a"', ": 1}"))
    ollama = OllamaProvider(server.url)
    gateway, registry = gateway_for({"ollama": ollama}, local_token_limit=None)
    entries = [ChainEntry("slow", "ollama", 1), ChainEntry("llama3.1:8b", "ollama", 2)]
    stream = await gateway.stream("chat_deep", entries, greq(), "/api/chat/deep/stream")
    text = "".join([p async for p in stream])
    await ollama.aclose()
    assert text == '{"a": 1}' and stream.fallback_count == 1
    assert (
        registry.get_sample_value(
            "chat_timeout_count_total", {"endpoint": "/api/chat/deep/stream", "model": "slow"}
        )
        == 1
    )


# --- secrets -----------------------------------------------------------------------------


async def test_api_key_never_appears_in_logs_errors_or_bodies(
    server: ScriptedServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Hostile server: echoes the Authorization header into its error and malformed bodies.
    server.on("a", Reply(503, b"upstream said: ", echo_auth=True))
    server.on("b", Reply(200, b"not json, header was: ", echo_auth=True))
    server.on("c", Reply(401, b"bad key: ", echo_auth=True))
    server.on("d", Reply(429, b"", {"Retry-After": "0"}, echo_auth=True))
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setenv("OPENROUTER_BASE_URL", server.url)
    settings = LLMSettings()  # type: ignore[call-arg]
    providers = build_llm_providers(settings)
    caplog.set_level(logging.DEBUG)
    gateway, _ = gateway_for(providers)
    with pytest.raises(AllModelsFailed) as caught:
        await gateway.complete("chat_deep", chain("a", "b", "c", "d"), greq(), "/api/chat/deep")
    raws = []
    try:
        await providers["openrouter"].complete(req(), "b")
    except MalformedResponse as exc:
        raws.append(exc.raw)
    for provider in providers.values():
        await provider.aclose()
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"  # it was sent
    seen = [
        caplog.text,
        str(caught.value),
        json.dumps(caught.value.body()),
        *raws,
        repr(settings),
        str(settings.model_dump()),
        repr(providers["openrouter"]),
        str(caught.value.to_dict()),
    ]
    assert raws and "***" in raws[0]
    for text in seen:
        assert SECRET not in text
