"""Model discovery: the free models OpenRouter offers, and the models a local Ollama holds.

HTTP clients with timeouts. The OpenRouter key is sent as a bearer token and never appears in a
log line or an error message. Free models are cached in-process for an hour; when OpenRouter
fails the last list is served with `cached: true`, and without one the caller gets a 503.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import httpx
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from domain.errors import ServiceUnavailable

log = logging.getLogger(__name__)


class DiscoverySettings(BaseSettings):
    """Where OpenRouter and Ollama are (to be merged into adapters/settings.py)."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    openrouter_base_url: str = Field(
        default="https://openrouter.ai/api/v1", alias="OPENROUTER_BASE_URL"
    )
    openrouter_api_key: SecretStr | None = Field(default=None, alias="OPENROUTER_API_KEY")
    ollama_base_url: str = Field(default="http://127.0.0.1:11434", alias="OLLAMA_BASE_URL")
    discovery_timeout_s: float = Field(default=10.0, alias="MODEL_DISCOVERY_TIMEOUT", gt=0)
    openrouter_cache_ttl_s: float = Field(default=3600.0, alias="OPENROUTER_MODELS_TTL", gt=0)

    @field_validator("openrouter_base_url", "ollama_base_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @field_validator("openrouter_api_key", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value


class OpenRouterUnavailable(ServiceUnavailable):
    code = "openrouter_unavailable"
    hint = (
        "OpenRouter could not be reached and no model list is cached; check the network, "
        "OPENROUTER_BASE_URL and OPENROUTER_API_KEY, then retry."
    )


class OllamaNotRunning(ServiceUnavailable):
    code = "ollama_not_running"
    hint = (
        "Start Ollama with `ollama serve` (install it from https://ollama.com), or set "
        "OLLAMA_BASE_URL to where it runs; then retry."
    )


class _UpstreamFailure(Exception):
    """A failed call, described without secrets."""


@dataclass
class _Cached:
    models: list[dict[str, Any]]
    fetched_at: float  # wall clock, for the response
    stored_at: float  # monotonic, for the TTL


class ModelDiscovery:
    """Both discovery calls; one instance per process holds the OpenRouter cache."""

    def __init__(
        self,
        settings: DiscoverySettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings or DiscoverySettings()
        self._clock = clock
        self._transport = transport
        self._cache: _Cached | None = None
        self._lock = asyncio.Lock()

    # -- OpenRouter -----------------------------------------------------------------------
    async def openrouter_free_models(self) -> dict[str, Any]:
        """Free models (prompt and completion priced "0"), fresh or from the one-hour cache."""
        async with self._lock:
            cached = self._cache
            if cached is not None and self._clock() - cached.stored_at < self._ttl:
                return _free_response(cached, cached=True)
            try:
                models = await self._fetch_openrouter()
            except _UpstreamFailure as failure:
                if cached is not None:
                    log.warning("OpenRouter model list failed (%s); serving the cache", failure)
                    return _free_response(cached, cached=True)
                raise OpenRouterUnavailable(
                    f"OpenRouter model list unavailable: {failure}"
                ) from None
            self._cache = _Cached(models, time.time(), self._clock())
            return _free_response(self._cache, cached=False)

    @property
    def _ttl(self) -> float:
        return self.settings.openrouter_cache_ttl_s

    async def _fetch_openrouter(self) -> list[dict[str, Any]]:
        url = f"{self.settings.openrouter_base_url}/models"
        headers = {"Accept": "application/json"}
        key = self.settings.openrouter_api_key
        if key is not None:
            headers["Authorization"] = f"Bearer {key.get_secret_value()}"
        body = await self._get_json(url, headers, "OpenRouter")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise _UpstreamFailure(f"{url} answered without a 'data' list")
        return [free_model(m) for m in data if isinstance(m, dict) and is_free(m)]

    # -- Ollama ---------------------------------------------------------------------------
    async def ollama_models(self) -> dict[str, Any]:
        """The models a local Ollama holds; `OllamaNotRunning` (503) when it cannot answer."""
        url = f"{self.settings.ollama_base_url}/api/tags"
        try:
            body = await self._get_json(url, {"Accept": "application/json"}, "Ollama")
        except _UpstreamFailure as failure:
            log.warning("Ollama model list failed: %s", failure)
            raise OllamaNotRunning("Ollama is not running") from None
        models = body.get("models") if isinstance(body, dict) else None
        if not isinstance(models, list):
            raise OllamaNotRunning("Ollama is not running")
        listed = [ollama_model(m) for m in models if isinstance(m, dict)]
        return {"models": listed, "count": len(listed), "base_url": self.settings.ollama_base_url}

    # -- HTTP -----------------------------------------------------------------------------
    async def _get_json(self, url: str, headers: dict[str, str], who: str) -> Any:
        timeout = httpx.Timeout(self.settings.discovery_timeout_s)
        try:
            async with httpx.AsyncClient(timeout=timeout, transport=self._transport) as client:
                response = await client.get(url, headers=headers)
        except httpx.TimeoutException:
            raise _UpstreamFailure(
                f"{who} at {url} did not answer within {self.settings.discovery_timeout_s:g} s"
            ) from None
        except httpx.HTTPError as error:
            raise _UpstreamFailure(
                f"{who} at {url} could not be reached ({type(error).__name__})"
            ) from None
        if response.status_code != 200:
            raise _UpstreamFailure(f"{who} at {url} answered HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise _UpstreamFailure(f"{who} at {url} answered malformed JSON") from None


def is_free(model: dict[str, Any]) -> bool:
    pricing = model.get("pricing")
    if not isinstance(pricing, dict):
        return False
    return _zero(pricing.get("prompt")) and _zero(pricing.get("completion"))


def _zero(value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return False
    try:
        return Decimal(str(value)) == 0
    except InvalidOperation:
        return False


def free_model(model: dict[str, Any]) -> dict[str, Any]:
    """The spec's fields of one OpenRouter model."""
    supported = model.get("supported_parameters") or []
    if not isinstance(supported, list):
        supported = []
    reasoning = "reasoning" in supported or "include_reasoning" in supported
    context = model.get("context_length")
    return {
        "id": str(model.get("id", "")),
        "name": str(model.get("name") or model.get("id", "")),
        "description": str(model.get("description") or ""),
        "context_length": int(context) if isinstance(context, int | float) else None,
        # OpenRouter streams every model; a model may still say otherwise.
        "supports_streaming": bool(model.get("supports_streaming", True)),
        "supports_reasoning": bool(model.get("supports_reasoning", reasoning)),
    }


def ollama_model(model: dict[str, Any]) -> dict[str, Any]:
    details = model.get("details") if isinstance(model.get("details"), dict) else {}
    assert isinstance(details, dict)
    name = str(model.get("name") or model.get("model") or "")
    capabilities = model.get("capabilities")
    if not isinstance(capabilities, list):
        families = [str(f) for f in details.get("families") or [] if f]
        embedding = "embed" in name or any("bert" in f for f in families)
        capabilities = ["embedding"] if embedding else ["completion"]
    return {
        "name": name,
        "size": model.get("size"),
        "quantization": details.get("quantization_level"),
        "modified_at": model.get("modified_at"),
        "family": details.get("family"),
        "parameter_size": details.get("parameter_size"),
        "capabilities": capabilities,
    }


def _free_response(cache: _Cached, *, cached: bool) -> dict[str, Any]:
    return {
        "models": [dict(m) for m in cache.models],
        "count": len(cache.models),
        "cached": cached,
        "fetched_at": datetime.fromtimestamp(cache.fetched_at, UTC).isoformat(),
    }
