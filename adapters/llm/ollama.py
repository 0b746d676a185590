"""Ollama's native API: `/api/chat` (NDJSON streaming or one JSON body), `/api/embed`,
`/api/tags` (installed models) and `/api/ps` (models loaded in memory)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx

from adapters.llm._http import HttpProvider, error_in_body
from domain.llm import Completion, CompletionRequest

OLLAMA_BASE_URL = "http://127.0.0.1:11434"


class OllamaProvider(HttpProvider):
    """A local (or remote) Ollama server behind the `LLMProvider` port."""

    name = "ollama"

    def __init__(
        self,
        base_url: str = OLLAMA_BASE_URL,
        *,
        default_timeout: float = 120.0,
        keep_alive: str | None = None,
        num_ctx: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, default_timeout=default_timeout, transport=transport)
        self.keep_alive = keep_alive
        self.num_ctx = num_ctx

    def body(self, request: CompletionRequest, model: str, *, stream: bool) -> dict[str, Any]:
        options: dict[str, Any] = {
            "temperature": request.temperature,
            "num_predict": request.max_tokens,
        }
        if self.num_ctx:
            options["num_ctx"] = self.num_ctx
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "stream": stream,
            "options": options,
        }
        if request.response_format == "json_object":
            body["format"] = "json"
        elif isinstance(request.response_format, dict):
            body["format"] = request.response_format  # Ollama >= 0.5 takes a JSON schema
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        return body

    async def complete(self, request: CompletionRequest, model: str) -> Completion:
        started = time.perf_counter()
        data, text = await self.post_json(
            "/api/chat", self.body(request, model, stream=False), model, request.timeout
        )
        message = data.get("message") if isinstance(data, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise self.malformed("no message.content", text, model)
        return Completion(
            text=content,
            model=str(data.get("model") or model),
            provider=self.name,
            prompt_tokens=int(data.get("prompt_eval_count") or 0),
            completion_tokens=int(data.get("eval_count") or 0),
            latency_s=time.perf_counter() - started,
        )

    async def stream(self, request: CompletionRequest, model: str) -> AsyncIterator[str]:
        try:
            async with self.client.stream(
                "POST",
                "/api/chat",
                json=self.body(request, model, stream=True),
                timeout=self.timeout(request.timeout),
            ) as response:
                if response.status_code >= 400:
                    raw = (await response.aread()).decode("utf-8", "replace")
                    raise self.status_error(response.status_code, response.headers, raw, model)
                async for line in response.aiter_lines():
                    if not line.strip():
                        continue
                    try:
                        event = json.loads(line)
                    except json.JSONDecodeError:
                        raise self.malformed("NDJSON line is not JSON", line, model) from None
                    embedded = error_in_body(event)
                    if embedded is not None:
                        raise self.status_error(embedded[0], response.headers, embedded[1], model)
                    message = event.get("message") if isinstance(event, dict) else None
                    content = message.get("content") if isinstance(message, dict) else None
                    if isinstance(content, str) and content:
                        yield content
                    if isinstance(event, dict) and event.get("done"):
                        return
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, model, request.timeout) from None

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        if not texts:
            return []
        try:
            response = await self.client.post(
                "/api/embed", json={"model": model, "input": list(texts)}
            )
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, model, None) from None
        if response.status_code >= 400:
            raise self.status_error(response.status_code, response.headers, response.text, model)
        try:
            vectors = response.json()["embeddings"]
            result = [[float(x) for x in row] for row in vectors]
        except (ValueError, KeyError, TypeError):
            raise self.malformed("embeddings body", response.text, model) from None
        if len(result) != len(texts):
            raise self.malformed("embedding count differs from input count", response.text, model)
        return result

    async def list_models(self) -> list[dict[str, Any]]:
        """`GET /api/tags`: the installed models (name, size, details...)."""
        return await self._models("/api/tags")

    async def running_models(self) -> list[dict[str, Any]]:
        """`GET /api/ps`: the models loaded in memory (size, size_vram, expires_at...)."""
        return await self._models("/api/ps")

    async def _models(self, path: str) -> list[dict[str, Any]]:
        try:
            response = await self.client.get(path, timeout=self.timeout(10.0))
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, "", 10.0) from None
        if response.status_code >= 400:
            raise self.status_error(response.status_code, response.headers, response.text, "")
        try:
            models = response.json().get("models", [])
        except (ValueError, AttributeError):
            raise self.malformed(f"{path} body", response.text, "") from None
        return [m for m in models if isinstance(m, dict)]
