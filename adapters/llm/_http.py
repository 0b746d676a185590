"""Shared HTTP plumbing of the LLM providers: a lazy httpx client and error mapping.

Error messages are built from status codes and our own words only: never from request
headers (the API key) and never from the model's output (kept in `MalformedResponse.raw`,
with any secret redacted, for DEBUG logs).
"""

from __future__ import annotations

import email.utils
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

import httpx

from domain.llm import (
    MalformedResponse,
    OutOfMemory,
    ProviderError,
    ProviderRequestFailed,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)

log = logging.getLogger("adapters.llm")

DEFAULT_TIMEOUT_S = 60.0
_CONNECT_TIMEOUT_S = 10.0
_OOM_MARKERS = ("out of memory", "requires more system memory", "insufficient memory", "oom")


class HttpProvider:
    """Base of the HTTP providers: one lazily created `httpx.AsyncClient` per instance."""

    name = "http"

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        default_timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key or None
        self._headers = dict(headers or {})
        self._default_timeout = default_timeout
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            headers = {"Accept": "application/json", **self._headers}
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                transport=self._transport,
                timeout=httpx.Timeout(self._default_timeout, connect=_CONNECT_TIMEOUT_S),
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def timeout(self, seconds: float | None) -> httpx.Timeout:
        total = seconds if seconds is not None else self._default_timeout
        return httpx.Timeout(total, connect=min(_CONNECT_TIMEOUT_S, total))

    def redact(self, text: str) -> str:
        if self._api_key and self._api_key in text:
            text = text.replace(self._api_key, "***")
        return text

    def transport_error(
        self, exc: httpx.HTTPError, model: str, seconds: float | None
    ) -> ProviderError:
        """Map an httpx exception (timeouts, refused or cut connections) to a typed error."""
        name = self.name
        if isinstance(exc, httpx.ConnectTimeout):
            return ProviderUnavailable(
                f"Could not connect to {name} (connect timeout)", provider=name, model=model
            )
        if isinstance(exc, httpx.TimeoutException):
            waited = seconds if seconds is not None else self._default_timeout
            return ProviderTimeout(timeout=waited, provider=name, model=model)
        if isinstance(exc, httpx.ConnectError):
            return ProviderUnavailable(
                f"Could not connect to {name} at {self.base_url}", provider=name, model=model
            )
        if isinstance(exc, httpx.TransportError):
            return ProviderUnavailable(
                f"Connection to {name} failed ({type(exc).__name__})", provider=name, model=model
            )
        return ProviderRequestFailed(
            f"{name} request failed ({type(exc).__name__})", provider=name, model=model
        )

    def status_error(
        self, status: int, headers: Mapping[str, str], body: str, model: str
    ) -> ProviderError:
        """Map a non-2xx answer (or an error object inside a 200) to a typed error."""
        where: dict[str, Any] = {"provider": self.name, "model": model, "status": status}
        if status == 429:
            return RateLimited(retry_after=parse_retry_after(headers.get("retry-after")), **where)
        if status in (502, 503, 504):
            return ProviderUnavailable(f"Service unavailable ({status})", **where)
        lowered = body.lower()
        if status >= 500 and any(marker in lowered for marker in _OOM_MARKERS):
            return OutOfMemory(f"Out of memory ({status})", **where)
        if status in (401, 403):
            return ProviderRequestFailed(
                f"{self.name} refused the credentials ({status})",
                hint=f"Check the API key configured for {self.name}.",
                **where,
            )
        if status == 404:
            return ProviderRequestFailed(f"Model or route not found at {self.name} (404)", **where)
        return ProviderRequestFailed(f"{self.name} answered HTTP {status}", **where)

    async def post_json(
        self, path: str, body: dict[str, Any], model: str, request_timeout: float | None
    ) -> tuple[Any, str]:
        """POST `body`; the parsed JSON reply and its raw text, every failure mapped to its type."""
        try:
            response = await self.client.post(
                path, json=body, timeout=self.timeout(request_timeout)
            )
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, model, request_timeout) from None
        text = response.text
        if response.status_code >= 400:
            raise self.status_error(response.status_code, response.headers, text, model)
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise self.malformed("body is not JSON", text, model) from None
        embedded = error_in_body(data)
        if embedded is not None:
            raise self.status_error(embedded[0], response.headers, embedded[1], model)
        return data, text

    def malformed(self, what: str, raw: str, model: str) -> MalformedResponse:
        return MalformedResponse(
            f"Malformed response ({what})",
            raw=self.redact(raw[:20_000]),
            provider=self.name,
            model=model,
        )


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None when absent."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_in_body(data: Any) -> tuple[int, str] | None:
    """OpenRouter and Ollama sometimes answer 200 with `{"error": ...}`: (status, message)."""
    if not isinstance(data, dict) or "error" not in data or data.get("choices"):
        return None
    error = data["error"]
    if isinstance(error, dict):
        code = error.get("code")
        status = code if isinstance(code, int) and 400 <= code < 600 else 500
        return status, str(error.get("message", ""))
    return 500, str(error)
