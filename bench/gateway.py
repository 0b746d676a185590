"""The LLM gateway's own overhead per call, against a scripted OpenAI-compatible server.

For each call: total time of `Gateway.complete` minus the time spent inside the provider's
`complete` (HTTP round trip and body decoding), both measured in the same run. What is
left is the gateway: chain checks, breaker, request shaping, reasoning stripping, JSON
parsing, metrics and token accounting.
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import threading
import time
from collections.abc import AsyncIterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry

from adapters.llm.openai_compatible import OpenAICompatibleProvider
from domain.llm import ChainEntry, ChatMessage, Completion, CompletionRequest
from queries.gateway import Gateway, GatewayConfig

_ANSWER = {
    "answer": "stg_orders feeds customer_summary through int_orders.",
    "evidence": [{"type": "graph", "id": "urn:li:table:shop:stg_orders", "note": "edge"}],
    "next_actions": ["Open urn:li:table:shop:int_orders"],
    "warnings": [],
}
_BODY = json.dumps(
    {
        "id": "bench",
        "model": "bench-model",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "<think>short</think>" + json.dumps(_ANSWER),
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 40},
    }
).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(_BODY)))
        self.end_headers()
        self.wfile.write(_BODY)


class _Timed:
    """Wraps a provider and records the time spent inside its `complete`."""

    def __init__(self, inner: OpenAICompatibleProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.last = 0.0

    async def complete(self, request: CompletionRequest, model: str) -> Completion:
        started = time.perf_counter()
        try:
            return await self.inner.complete(request, model)
        finally:
            self.last = time.perf_counter() - started

    def stream(self, request: CompletionRequest, model: str) -> AsyncIterator[str]:
        return self.inner.stream(request, model)

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        return await self.inner.embed(texts, model)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _run(url: str, calls: int, warmup: int) -> dict[str, Any]:
    provider = _Timed(OpenAICompatibleProvider("openai_compatible", url))
    gateway = Gateway(
        {"openai_compatible": provider}, config=GatewayConfig(), registry=CollectorRegistry()
    )
    chain = [
        ChainEntry("cooling-model", "openai_compatible", 1),
        ChainEntry("bench-model", "openai_compatible", 2, {"temperature": 0.2}),
    ]
    gateway.breaker.trip(chain[0].key, 3600, "rate limit")  # exercise the skip path too
    request = CompletionRequest(
        messages=(
            ChatMessage("system", "Answer in JSON." * 20),
            ChatMessage("user", "What feeds customer_summary?"),
        ),
        response_format="json_object",
    )
    overhead: list[float] = []
    provider_s: list[float] = []
    total_s: list[float] = []
    try:
        for i in range(warmup + calls):
            started = time.perf_counter()
            result = await gateway.complete("chat_deep", chain, request, "/api/chat/deep")
            total = time.perf_counter() - started
            if result.data is None:
                raise RuntimeError("the bench answer was not parsed")
            if i >= warmup:
                total_s.append(total)
                provider_s.append(provider.last)
                overhead.append(total - provider.last)
    finally:
        await provider.aclose()
    ms = 1000.0
    return {
        "calls": calls,
        "overhead_median_ms": statistics.median(overhead) * ms,
        "overhead_p95_ms": _pct(overhead, 0.95) * ms,
        "provider_median_ms": statistics.median(provider_s) * ms,
        "total_median_ms": statistics.median(total_s) * ms,
        "total_p95_ms": _pct(total_s, 0.95) * ms,
    }


def run_gateway_bench(calls: int = 2000, warmup: int = 50) -> dict[str, Any]:
    """Median and p95 of the gateway's own time per call (milliseconds); target < 2 ms."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        return asyncio.run(_run(url, calls, warmup))
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    print(json.dumps(run_gateway_bench(), indent=2))
