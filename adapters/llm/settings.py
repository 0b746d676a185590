"""LLM provider and gateway configuration from the environment (and `.env`)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from adapters.llm.extractive import ExtractiveProvider
from adapters.llm.ollama import OLLAMA_BASE_URL, OllamaProvider
from adapters.llm.openai_compatible import (
    GROQ_BASE_URL,
    OPENROUTER_BASE_URL,
    OpenAICompatibleProvider,
)
from domain.llm import ChainEntry, LLMProvider

log = logging.getLogger(__name__)

# The model the inference fallback calls when INFERENCE_FALLBACK_MODEL is unset: free ones.
DEFAULT_FALLBACK_MODELS: dict[str, str] = {
    "openrouter": "google/gemini-2.0-flash-exp:free",
    "groq": "llama-3.1-8b-instant",
}


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() or None if value is not None else None


class LLMSettings(BaseSettings):
    """Base URLs and keys of the providers; the gateway's delays, timeouts and cooldowns."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    ollama_base_url: str = Field(default=OLLAMA_BASE_URL, alias="OLLAMA_BASE_URL")
    openrouter_base_url: str = Field(default=OPENROUTER_BASE_URL, alias="OPENROUTER_BASE_URL")
    openrouter_api_key: SecretStr | None = Field(default=None, alias="OPENROUTER_API_KEY")
    groq_base_url: str = Field(default=GROQ_BASE_URL, alias="GROQ_BASE_URL")
    groq_api_key: SecretStr | None = Field(default=None, alias="GROQ_API_KEY")
    openai_compatible_base_url: str | None = Field(default=None, alias="OPENAI_COMPATIBLE_BASE_URL")
    openai_compatible_api_key: SecretStr | None = Field(
        default=None, alias="OPENAI_COMPATIBLE_API_KEY"
    )
    inference_fallback_provider: Literal["groq", "openrouter"] | None = Field(
        default=None, alias="INFERENCE_FALLBACK_PROVIDER"
    )
    inference_fallback_model: str | None = Field(default=None, alias="INFERENCE_FALLBACK_MODEL")

    base_delay_s: float = Field(default=2.0, alias="LLM_BASE_DELAY", ge=0)
    backoff_factor: float = Field(default=2.0, alias="LLM_BACKOFF_FACTOR", ge=1)
    max_delay_s: float = Field(default=60.0, alias="LLM_MAX_DELAY", ge=0)
    timeout_deep_s: float = Field(default=90.0, alias="LLM_TIMEOUT_DEEP", gt=0)
    timeout_graph_s: float = Field(default=45.0, alias="LLM_TIMEOUT_GRAPH", gt=0)
    timeout_semantic_s: float = Field(default=45.0, alias="LLM_TIMEOUT_SEMANTIC", gt=0)
    timeout_text_s: float = Field(default=30.0, alias="LLM_TIMEOUT_TEXT", gt=0)
    timeout_title_s: float = Field(default=30.0, alias="LLM_TIMEOUT_TITLE", gt=0)
    timeout_default_s: float = Field(default=60.0, alias="LLM_TIMEOUT_DEFAULT", gt=0)
    rate_limit_cooldown_s: float = Field(default=60.0, alias="LLM_RATE_LIMIT_COOLDOWN", ge=0)
    unavailable_cooldown_s: float = Field(default=15.0, alias="LLM_UNAVAILABLE_COOLDOWN", ge=0)
    local_token_limit: int | None = Field(default=3000, alias="LLM_LOCAL_TOKEN_LIMIT")
    exhausted_retry_after_s: int = Field(default=120, alias="LLM_EXHAUSTED_RETRY_AFTER", ge=0)
    local_timeout_retries: int = Field(default=3, alias="OLLAMA_TIMEOUT_RETRIES", ge=0)
    temperature_deep: float = Field(default=0.6, alias="CHAT_DEEP_TEMPERATURE", ge=0, le=2)
    temperature_graph: float = Field(default=0.1, alias="CHAT_GRAPH_TEMPERATURE", ge=0, le=2)
    temperature_semantic: float = Field(default=0.2, alias="CHAT_SEMANTIC_TEMPERATURE", ge=0, le=2)
    temperature_text: float = Field(default=0.3, alias="CHAT_TEXT_TEMPERATURE", ge=0, le=2)
    temperature_title: float = Field(default=0.2, alias="CHAT_TITLE_TEMPERATURE", ge=0, le=2)

    # Which model embeds chunks and queries: `local` (the sentence-transformers model, the
    # embedded default) or `config` (the `embedding` model configuration, e.g. Ollama).
    embedding_source: Literal["local", "config"] = Field(default="local", alias="EMBEDDING_SOURCE")
    ollama_embed_batch_size: int = Field(default=50, alias="OLLAMA_EMBED_BATCH_SIZE", gt=0)
    ollama_embed_timeout_s: float = Field(default=60.0, alias="OLLAMA_EMBED_TIMEOUT", gt=0)

    ollama_chat_model: str = Field(default="llama3.1:8b", alias="OLLAMA_CHAT_MODEL")
    ollama_embedding_model: str = Field(default="nomic-embed-text", alias="OLLAMA_EMBEDDING_MODEL")
    ollama_use_quantized: bool = Field(default=False, alias="OLLAMA_USE_QUANTIZED")
    ollama_quantization: str = Field(default="q4_0", alias="OLLAMA_QUANTIZATION")
    ollama_health_interval_s: float = Field(default=30.0, alias="OLLAMA_HEALTH_INTERVAL", gt=0)
    ollama_health_timeout_s: float = Field(default=5.0, alias="OLLAMA_HEALTH_TIMEOUT", gt=0)
    ollama_memory_mb: float | None = Field(default=None, alias="OLLAMA_MEMORY_MB")
    ollama_min_memory_mb: float = Field(default=1024.0, alias="OLLAMA_MIN_MEMORY_MB", ge=0)
    ollama_context_window: int = Field(default=8192, alias="OLLAMA_CONTEXT_WINDOW", gt=0)
    ollama_min_context_window: int = Field(default=2048, alias="OLLAMA_MIN_CONTEXT_WINDOW", gt=0)
    ollama_kv_mb_per_token: float = Field(default=0.125, alias="OLLAMA_KV_MB_PER_TOKEN", gt=0)
    free_tier_default_model: str = Field(
        default="google/gemini-2.0-flash-exp:free", alias="FREE_TIER_DEFAULT_MODEL"
    )

    @field_validator("inference_fallback_provider", "inference_fallback_model", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    def inference_fallback(self) -> ChainEntry | None:
        """The remote entry of hybrid inference (INFERENCE_FALLBACK_PROVIDER, groq|openrouter)
        when its API key is set; None (and a warning) otherwise: the service continues."""
        provider = self.inference_fallback_provider
        if provider is None:
            return None
        key = self.openrouter_api_key if provider == "openrouter" else self.groq_api_key
        if not _secret(key):
            log.warning(
                "INFERENCE_FALLBACK_PROVIDER=%s but %s_API_KEY is not set: no inference "
                "fallback; local models answer alone",
                provider,
                provider.upper(),
            )
            return None
        model = self.inference_fallback_model or DEFAULT_FALLBACK_MODELS[provider]
        return ChainEntry(model_id=model, provider=provider, priority=1)

    def temperatures(self) -> dict[str, float]:
        return {
            "deep": self.temperature_deep,
            "graph": self.temperature_graph,
            "semantic": self.temperature_semantic,
            "text": self.temperature_text,
            "title": self.temperature_title,
        }

    def gateway_options(self) -> dict[str, Any]:
        """Keyword arguments of `queries.gateway.GatewayConfig`."""
        return {
            "base_delay": self.base_delay_s,
            "backoff_factor": self.backoff_factor,
            "max_delay": self.max_delay_s,
            "timeouts": {
                "deep": self.timeout_deep_s,
                "graph": self.timeout_graph_s,
                "semantic": self.timeout_semantic_s,
                "text": self.timeout_text_s,
                "title": self.timeout_title_s,
            },
            "default_timeout": self.timeout_default_s,
            "rate_limit_cooldown": self.rate_limit_cooldown_s,
            "unavailable_cooldown": self.unavailable_cooldown_s,
            "local_token_limit": self.local_token_limit,
            "exhausted_retry_after": self.exhausted_retry_after_s,
            "temperatures": self.temperatures(),
            "inference_fallback": self.inference_fallback(),
            "local_timeout_retries": self.local_timeout_retries,
        }

    def configured_providers(self) -> list[str]:
        names = ["ollama", "extractive"]
        if _secret(self.openrouter_api_key):
            names.append("openrouter")
        if _secret(self.groq_api_key):
            names.append("groq")
        if self.openai_compatible_base_url:
            names.append("openai_compatible")
        return names


def build_llm_providers(settings: LLMSettings | None = None) -> dict[str, LLMProvider]:
    """One provider per configured name; nothing connects until the first call.

    OpenRouter and Groq need their key; `openai_compatible` needs its base URL. A chain
    entry naming a provider left out here is skipped by the gateway ("not configured").
    """
    s = settings or LLMSettings()
    providers: dict[str, LLMProvider] = {
        "ollama": OllamaProvider(s.ollama_base_url),
        "extractive": ExtractiveProvider(),
    }
    if key := _secret(s.openrouter_api_key):
        providers["openrouter"] = OpenAICompatibleProvider(
            "openrouter",
            s.openrouter_base_url,
            api_key=key,
            headers={"X-Title": "upstream"},
        )
    if key := _secret(s.groq_api_key):
        providers["groq"] = OpenAICompatibleProvider(
            "groq", s.groq_base_url, api_key=key, supports_json_schema=False
        )
    if s.openai_compatible_base_url:
        providers["openai_compatible"] = OpenAICompatibleProvider(
            "openai_compatible",
            s.openai_compatible_base_url,
            api_key=_secret(s.openai_compatible_api_key),
        )
    missing = [n for n in ("openrouter", "groq") if n not in providers]
    if missing:
        log.info("LLM providers without an API key (not used): %s", ", ".join(missing))
    return providers
