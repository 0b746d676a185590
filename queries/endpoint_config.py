"""`GET /api/v1/config`: how each chat endpoint is served (llm-service.md "Default models per
endpoint with temperature settings", LLM-24.2).

For every chat endpoint: its usage type, its fallback chain as the `model_configs` read model
holds it now (model, provider, priority and the temperature each entry is called with), the
endpoint temperature (`CHAT_<ENDPOINT>_TEMPERATURE`, used by entries whose parameters set none)
and its timeout; then the gateway's retry settings, the inference fallback and the embedding
model. Nothing here is a default model: an endpoint without configuration shows the 503 body
its requests would get.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from domain.llm import ChainEntry
from domain.model_config import ModelSelectionUnavailable, usage_type_for_chat
from queries.gateway import GatewayConfig

CHAT_ENDPOINTS: tuple[str, ...] = ("deep", "graph", "semantic", "text", "title")

ChainReader = Callable[[str], Sequence[Mapping[str, Any]]]


def endpoint_config(
    chain_of: ChainReader,
    gateway: GatewayConfig,
    *,
    embedding: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The configuration document; `chain_of(usage_type)` raises the spec's 503 errors."""
    endpoints = {f"/api/chat/{name}": _endpoint(name, chain_of, gateway) for name in CHAT_ENDPOINTS}
    fallback = gateway.inference_fallback
    return {
        "endpoints": endpoints,
        "gateway": {
            "max_retries": gateway.max_attempts,
            "base_delay_s": gateway.base_delay,
            "backoff_factor": gateway.backoff_factor,
            "max_delay_s": gateway.max_delay,
            "rate_limit_cooldown_s": gateway.rate_limit_cooldown,
            "unavailable_cooldown_s": gateway.unavailable_cooldown,
            "exhausted_retry_after_s": gateway.exhausted_retry_after,
            "local_token_limit": gateway.local_token_limit,
            "local_timeout_retries": gateway.local_timeout_retries,
        },
        "inference_fallback": (
            {"provider": fallback.provider, "model_id": fallback.model_id} if fallback else None
        ),
        "embedding": dict(embedding) if embedding is not None else None,
    }


def _endpoint(name: str, chain_of: ChainReader, gateway: GatewayConfig) -> dict[str, Any]:
    usage_type = usage_type_for_chat(name).value
    endpoint_temperature = gateway.temperature_for(name)
    described: dict[str, Any] = {
        "usage_type": usage_type,
        "temperature": endpoint_temperature,
        "timeout_s": gateway.timeout_for(name, usage_type),
        "chain": [],
        "error": None,
    }
    try:
        rows = chain_of(usage_type)
    except ModelSelectionUnavailable as error:
        described["error"] = error.body()
        return described
    for row in rows:
        entry = ChainEntry.from_row(row)
        own = entry.parameters.get("temperature")
        described["chain"].append(
            {
                "priority": entry.priority,
                "model_id": entry.model_id,
                "model_name": row.get("model_name", entry.model_id),
                "provider": entry.provider,
                "temperature": own if own is not None else endpoint_temperature,
                "max_tokens": entry.parameter("max_tokens"),
                "reasoning_mode": entry.reasoning_mode,
                "streaming": entry.streaming,
            }
        )
    return described
