"""OpenAI-style chat completions (`POST /chat/completions`, SSE streaming, `/embeddings`).

One class serves `openrouter`, `groq` and `openai_compatible` (e.g. a local llama.cpp
`llama-server`): only the base URL, the key and the provider name differ.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from adapters.llm._http import HttpProvider, error_in_body
from domain.llm import (
    CapabilityUnsupported,
    Completion,
    CompletionRequest,
)

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
GROQ_BASE_URL = "https://api.groq.com/openai/v1"


class OpenAICompatibleProvider(HttpProvider):
    """An OpenAI-compatible chat API behind the `LLMProvider` port."""

    def __init__(
        self,
        name: str,
        base_url: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        default_timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
        supports_json_schema: bool = True,
    ) -> None:
        super().__init__(
            base_url,
            api_key=api_key,
            headers=headers,
            default_timeout=default_timeout,
            transport=transport,
        )
        self.name = name
        self.supports_json_schema = supports_json_schema

    def body(self, request: CompletionRequest, model: str, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "stream": stream,
        }
        fmt = request.response_format
        if fmt == "json_object" or (isinstance(fmt, dict) and not self.supports_json_schema):
            body["response_format"] = {"type": "json_object"}
        elif isinstance(fmt, dict):
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": str(fmt.get("title", "response")).replace(" ", "_")[:64],
                    "schema": fmt,
                    "strict": True,
                },
            }
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    async def complete(self, request: CompletionRequest, model: str) -> Completion:
        started = time.perf_counter()
        data, text = await self.post_json(
            "/chat/completions", self.body(request, model, stream=False), model, request.timeout
        )
        try:
            choice = data["choices"][0]
            content = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise self.malformed("no choices[0].message", text, model) from None
        if not isinstance(content, str):
            raise self.malformed("message content is not text", text, model)
        usage = data.get("usage") or {}
        return Completion(
            text=content,
            model=str(data.get("model") or model),
            provider=self.name,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_s=time.perf_counter() - started,
        )

    async def stream(self, request: CompletionRequest, model: str) -> AsyncIterator[str]:
        body = self.body(request, model, stream=True)
        try:
            async with self.client.stream(
                "POST",
                "/chat/completions",
                json=body,
                timeout=self.timeout(request.timeout),
                headers={"Accept": "text/event-stream"},
            ) as response:
                if response.status_code >= 400:
                    raw = (await response.aread()).decode("utf-8", "replace")
                    raise self.status_error(response.status_code, response.headers, raw, model)
                async for delta in self._sse_deltas(response, model):
                    yield delta
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, model, request.timeout) from None

    async def _sse_deltas(self, response: httpx.Response, model: str) -> AsyncIterator[str]:
        data_lines: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith(":"):  # SSE comment (OpenRouter's keep-alive "PROCESSING")
                continue
            if line.startswith("data:"):
                data_lines.append(line[5:].lstrip())
                continue
            if line.strip() or not data_lines:
                continue
            payload, data_lines = "\n".join(data_lines), []
            if payload == "[DONE]":
                return
            delta = self._delta(payload, model, response)
            if delta:
                yield delta
        if data_lines and (payload := "\n".join(data_lines)) != "[DONE]":
            delta = self._delta(payload, model, response)
            if delta:
                yield delta

    def _delta(self, payload: str, model: str, response: httpx.Response) -> str:
        try:
            event = json.loads(payload)
        except json.JSONDecodeError:
            raise self.malformed("SSE event is not JSON", payload, model) from None
        embedded = error_in_body(event)
        if embedded is not None:
            raise self.status_error(embedded[0], response.headers, embedded[1], model)
        choices = event.get("choices") if isinstance(event, dict) else None
        if not choices:
            return ""  # e.g. the final usage-only event
        delta = choices[0].get("delta") or {}
        content = delta.get("content")
        return content if isinstance(content, str) else ""

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        if not texts:
            return []
        try:
            response = await self.client.post(
                "/embeddings", json={"model": model, "input": list(texts)}
            )
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, model, None) from None
        if response.status_code == 404:
            raise CapabilityUnsupported(
                f"{self.name} has no embeddings endpoint", provider=self.name, model=model
            )
        if response.status_code >= 400:
            raise self.status_error(response.status_code, response.headers, response.text, model)
        try:
            rows = sorted(response.json()["data"], key=lambda r: r.get("index", 0))
            return [[float(x) for x in row["embedding"]] for row in rows]
        except (ValueError, KeyError, TypeError):
            raise self.malformed("embeddings body", response.text, model) from None

    async def list_models(self) -> list[dict[str, Any]]:
        """`GET /models` (OpenRouter lists pricing there; discovery reads it)."""
        try:
            response = await self.client.get("/models")
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, "", None) from None
        if response.status_code >= 400:
            raise self.status_error(response.status_code, response.headers, response.text, "")
        try:
            data = response.json().get("data", [])
        except (ValueError, AttributeError):
            raise self.malformed("models body", response.text, "") from None
        return [m for m in data if isinstance(m, dict)]
