"""Model validation and the chat request's `model` override (rag-service.md "Model
Validation"; llm-service.md "Non-free model requested in chat").

The allowlist is the configuration, never a hard-coded list: every enabled model
configuration (any usage type) is allowed. `validate(model)`:

1. not in the allowlist: `ModelNotAllowed` (400) naming the allowed models;
2. an Ollama model: it must be pulled (`/api/tags` lists `model` or `model:latest`), else
   `ModelUnavailable` (503) with the `ollama pull` command; Ollama unreachable:
   `LLMConnectionError` (503).

`chain_with_override(usage_type, chain, model)` puts the requested model first in the chain
(the rest of the usage type's chain stays behind it as the fallback). A model outside the
allowlist is refused, except when a cloud provider is configured: then it becomes an
OpenRouter entry for the free-tier policy to judge (kept when free, otherwise downgraded to
the default free model, logged and signalled: `queries.free_tier.enforce_chain`, applied by
the caller after this).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from domain.llm import ChainEntry, LLMConnectionError, ModelNotAllowed, ModelUnavailable

log = logging.getLogger(__name__)


class ModelLister(Protocol):
    """What validation needs of Ollama (adapters.llm.ollama.OllamaProvider)."""

    async def list_models(self) -> list[dict[str, Any]]: ...


ConfigRows = Callable[[], Sequence[Mapping[str, Any]]]


class ModelValidator:
    """Checks a requested model against the configuration and, for Ollama, its installed
    models. `configs` returns the enabled configuration rows (the DuckDB read model)."""

    def __init__(
        self,
        configs: ConfigRows,
        ollama: Any,  # a ModelLister (OllamaProvider), or None
        *,
        cloud_providers: Collection[str] = (),
        ollama_base_url: str = "",
        timeout_s: float = 5.0,
    ) -> None:
        self._configs = configs
        self._ollama: ModelLister | None = ollama
        self.cloud_providers = frozenset(cloud_providers)
        self.ollama_base_url = ollama_base_url or str(getattr(ollama, "base_url", ""))
        self.timeout_s = timeout_s

    async def allowlist(self) -> dict[str, ChainEntry]:
        """model_id -> its configuration (the first by usage type and priority)."""
        rows = await asyncio.to_thread(self._configs)
        allowed: dict[str, ChainEntry] = {}
        for row in rows:
            entry = ChainEntry.from_row(row)
            if entry.enabled:
                allowed.setdefault(entry.model_id, entry)
        return allowed

    async def validate(self, model: str) -> ChainEntry:
        """The configuration of `model`, once it is allowed and (Ollama) pulled."""
        allowed = await self.allowlist()
        entry = allowed.get(model)
        if entry is None:
            raise ModelNotAllowed(
                f"Model {model!r} not in allowlist. Available: {sorted(allowed)}",
                hint="Choose one of the available models, or configure this one "
                "(POST /api/v1/models/config).",
            )
        if entry.provider == "ollama":
            await self._check_pulled(model)
        return entry

    async def installed_models(self) -> list[str]:
        """Ollama's `/api/tags` names; `LLMConnectionError` when it cannot be reached."""
        if self._ollama is None:
            raise LLMConnectionError("Cannot connect to Ollama: no Ollama client is configured")
        try:
            async with asyncio.timeout(self.timeout_s):
                models = await self._ollama.list_models()
        except TimeoutError:
            raise LLMConnectionError(
                f"Cannot connect to Ollama at {self.ollama_base_url}: no answer within "
                f"{self.timeout_s:g} s"
            ) from None
        except Exception as error:  # the provider's typed errors, httpx errors
            reason = getattr(error, "message", None) or type(error).__name__
            raise LLMConnectionError(
                f"Cannot connect to Ollama at {self.ollama_base_url}: {reason}"
            ) from None
        return [str(m.get("name") or m.get("model") or "") for m in models]

    async def _check_pulled(self, model: str) -> None:
        names = await self.installed_models()
        if model not in names and f"{model}:latest" not in names:
            raise ModelUnavailable(
                f"Model {model!r} not available in Ollama. Run: ollama pull {model}",
                hint=f"Run `ollama pull {model}`, then retry.",
            )

    async def health_check(self) -> dict[str, Any]:
        """Ollama connectivity and whether every configured Ollama model is pulled."""
        wanted = sorted(m for m, e in (await self.allowlist()).items() if e.provider == "ollama")
        try:
            names = await self.installed_models()
        except LLMConnectionError as error:
            return {
                "status": "unavailable",
                "base_url": self.ollama_base_url,
                "error": error.message,
                "hint": error.detail_hint,
                "models": [],
                "configured_models": wanted,
                "missing_models": wanted,
            }
        missing = [m for m in wanted if m not in names and f"{m}:latest" not in names]
        return {
            "status": "degraded" if missing else "ok",
            "base_url": self.ollama_base_url,
            "error": None,
            "models": names,
            "configured_models": wanted,
            "missing_models": missing,
            "pull_commands": [f"ollama pull {m}" for m in missing],
        }

    async def chain_with_override(
        self, usage_type: str, chain: Sequence[ChainEntry], model: str | None
    ) -> list[ChainEntry]:
        """`chain` with the requested `model` first (unchanged when no model is requested)."""
        if not model:
            return list(chain)
        try:
            chosen = await self.validate(model)
        except ModelNotAllowed:
            if "openrouter" not in self.cloud_providers:
                raise
            log.info(
                "model override %s for %s is not configured: the free-tier policy decides",
                model,
                usage_type,
            )
            chosen = ChainEntry(model_id=model, provider="openrouter", priority=0)
        first = replace(chosen, priority=min((e.priority for e in chain), default=1) - 1)
        return [first, *(e for e in chain if e.key != chosen.key)]
