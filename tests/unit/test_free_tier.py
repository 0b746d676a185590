"""Free-tier enforcement: discovery's free list or the seed defaults, else the default free model;
logged, counted, signalled; and the gateway then answers with the downgraded model."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from domain.llm import ChainEntry, ChatMessage, Completion, CompletionRequest
from queries.free_tier import (
    DEFAULT_FREE_MODEL,
    DOWNGRADE_HEADER,
    REASON_FREE,
    REASON_LOCAL,
    REASON_NO_DISCOVERY,
    REASON_NOT_FREE,
    REASON_SEED,
    FreeTierPolicy,
    downgrade_headers,
    downgrade_metadata,
    enforce_chain,
    seed_cloud_model_ids,
)
from queries.gateway import Gateway, GatewayConfig

pytestmark = pytest.mark.unit

GEMINI = "google/gemini-2.0-flash-exp:free"
R1 = "deepseek/deepseek-r1-0528:free"
LLAMA_FREE = "meta-llama/llama-3.1-8b-instruct:free"
GPT4 = "openai/gpt-4"
OPUS = "anthropic/claude-3-opus"
ANSWER = {"answer": "ok", "evidence": [], "next_actions": [], "warnings": []}


class FakeDiscovery:
    """`openrouter_free_models()` as ModelDiscovery answers it (or fails like it)."""

    def __init__(self, free_ids: Sequence[str] = (), *, fail: bool = False) -> None:
        self.free_ids = list(free_ids)
        self.fail = fail
        self.calls = 0

    async def openrouter_free_models(self) -> dict[str, Any]:
        self.calls += 1
        if self.fail:
            raise RuntimeError("OpenRouter model list unavailable")
        models = [{"id": i, "name": i} for i in self.free_ids]
        return {"models": models, "count": len(models), "cached": True}


class RecordingProvider:
    """Answers every model with ANSWER and records which model it was asked for."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.models: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    async def complete(self, request: CompletionRequest, model: str) -> Completion:
        self.models.append(model)
        return Completion(json.dumps(ANSWER), model, self._name, 10, 5)

    async def stream(self, request: CompletionRequest, model: str) -> AsyncIterator[str]:
        yield json.dumps(ANSWER)

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        return []

    async def aclose(self) -> None:
        return None


def counter(registry: CollectorRegistry, from_model: str, to_model: str) -> float:
    value = registry.get_sample_value(
        "chat_model_downgrade_count_total", {"from_model": from_model, "to_model": to_model}
    )
    return value or 0.0


def request() -> CompletionRequest:
    return CompletionRequest(
        messages=(ChatMessage("user", "what feeds customer_summary?"),),
        response_format="json_object",
    )


def test_seed_defaults_are_the_cloud_models_of_the_default_profile() -> None:
    seeds = seed_cloud_model_ids()
    assert GEMINI in seeds and R1 in seeds
    assert "llama3.1:8b" not in seeds and "nomic-embed-text" not in seeds  # ollama entries


@pytest.mark.spec("LLM-12.1")
async def test_free_model_proceeds_unmodified(caplog: pytest.LogCaptureFixture) -> None:
    registry = CollectorRegistry()
    discovery = FakeDiscovery([LLAMA_FREE])
    policy = FreeTierPolicy(discovery, seed_cloud_model_ids(), registry=registry)
    caplog.set_level(logging.WARNING, logger="queries.free_tier")
    for model, reason in ((LLAMA_FREE, REASON_FREE), (GEMINI, REASON_SEED)):
        entry = ChainEntry(model, "openrouter", 1, {"temperature": 0.2})
        decision = await policy.check(entry)
        # THEN the request proceeds without modification; AND the specified model is used.
        assert decision.allowed and decision.entry is entry and decision.reason == reason
    assert not caplog.records
    assert counter(registry, LLAMA_FREE, DEFAULT_FREE_MODEL) == 0


async def test_local_providers_are_always_allowed_without_asking_discovery() -> None:
    discovery = FakeDiscovery(fail=True)
    policy = FreeTierPolicy(discovery, registry=CollectorRegistry())
    for provider in ("ollama", "openai_compatible", "extractive"):
        decision = await policy.check(ChainEntry("any-model", provider, 1))
        assert decision.allowed and decision.reason == REASON_LOCAL
    assert discovery.calls == 0


@pytest.mark.spec("LLM-12.2", "LLM-23.2", "LLM-10.4", "LLM-13.1")
async def test_non_free_model_is_downgraded_logged_counted_and_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()
    policy = FreeTierPolicy(FakeDiscovery([LLAMA_FREE]), registry=registry)
    caplog.set_level(logging.WARNING, logger="queries.free_tier")
    chain = [ChainEntry(GPT4, "openrouter", 1, {"temperature": 0.1})]
    enforced = await enforce_chain(policy, chain, context="endpoint=/api/chat/text")

    # THEN it downgrades to google/gemini-2.0-flash-exp:free (the configured default).
    [decision] = enforced.downgrades
    assert decision.entry.model_id == GEMINI == DEFAULT_FREE_MODEL
    assert decision.entry.provider == "openrouter"
    assert decision.entry.priority == 1 and decision.entry.parameters == {"temperature": 0.1}
    assert decision.reason == REASON_NOT_FREE
    # AND it logs a warning with the original model name, the replacement and the reason.
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert GPT4 in message and GEMINI in message and REASON_NOT_FREE in message
    assert "endpoint=/api/chat/text" in message
    assert counter(registry, GPT4, GEMINI) == 1

    # AND it proceeds with / returns completion using the free-tier model.
    provider = RecordingProvider("openrouter")
    gateway = Gateway({"openrouter": provider}, config=GatewayConfig(base_delay=0))
    result = await gateway.complete("chat_text", enforced.entries, request(), "/api/chat/text")
    assert provider.models == [GEMINI]
    assert result.model_used == GEMINI and result.data == ANSWER


@pytest.mark.spec("LLM-22.4")
async def test_non_free_fallback_entry_is_downgraded_and_not_called_twice() -> None:
    registry = CollectorRegistry()
    policy = FreeTierPolicy(FakeDiscovery([]), registry=registry)
    chain = [
        ChainEntry(R1, "openrouter", 1),
        ChainEntry(OPUS, "openrouter", 2),  # the fallback model is not free
        ChainEntry("llama3.1:8b", "ollama", 3),
        ChainEntry(GEMINI, "openrouter", 4),
    ]
    enforced = await enforce_chain(policy, chain)
    # THEN each fallback model is validated; AND a non-free one becomes the default free model.
    assert [d.allowed for d in enforced.decisions] == [True, False, True, True]
    assert [e.model_id for e in enforced.entries] == [R1, GEMINI, "llama3.1:8b"]
    assert enforced.downgrades[0].to_dict() == {
        "from_model": OPUS,
        "from_provider": "openrouter",
        "to_model": GEMINI,
        "to_provider": "openrouter",
        "reason": REASON_NOT_FREE,
    }
    assert counter(registry, OPUS, GEMINI) == 1


async def test_response_signals_the_downgrade_in_header_and_metadata() -> None:
    policy = FreeTierPolicy(FakeDiscovery([]), registry=CollectorRegistry())
    enforced = await enforce_chain(policy, [ChainEntry(GPT4, "openrouter", 1)])
    assert enforced.headers() == {DOWNGRADE_HEADER: f"{GPT4} -> {GEMINI}"}
    meta = enforced.metadata()
    assert meta["model_downgraded"] is True
    assert meta["downgrades"][0]["from_model"] == GPT4
    clean = await enforce_chain(policy, [ChainEntry(GEMINI, "openrouter", 1)])
    assert clean.headers() == {} and clean.metadata() == {"model_downgraded": False}
    assert downgrade_headers(()) == {} and downgrade_metadata(()) == {"model_downgraded": False}


async def test_discovery_down_allows_seed_defaults_only() -> None:
    registry = CollectorRegistry()
    policy = FreeTierPolicy(FakeDiscovery(fail=True), registry=registry)
    assert (await policy.check(ChainEntry(GEMINI, "openrouter", 1))).allowed
    decision = await policy.check(ChainEntry(LLAMA_FREE, "openrouter", 2))
    assert decision.downgraded and decision.reason == REASON_NO_DISCOVERY
    assert counter(registry, LLAMA_FREE, GEMINI) == 1


async def test_groq_models_pass_only_as_seed_defaults() -> None:
    policy = FreeTierPolicy(
        FakeDiscovery(["llama-3.1-8b-instant"]), seed_model_ids=[GEMINI], registry=None
    )
    decision = await policy.check(ChainEntry("llama-3.1-8b-instant", "groq", 1))
    assert decision.downgraded and decision.entry.provider == "openrouter"
    assert "groq" in decision.reason


async def test_configured_default_model_and_disabled_entries_are_left_alone() -> None:
    policy = FreeTierPolicy(
        FakeDiscovery([]), seed_model_ids=[], default_model="qwen/qwen3-4b:free"
    )
    chain = [
        ChainEntry(GPT4, "openrouter", 1, enabled=False),
        ChainEntry(OPUS, "openrouter", 2),
    ]
    enforced = await enforce_chain(policy, chain)
    assert [(e.model_id, e.enabled) for e in enforced.entries] == [
        (GPT4, False),
        ("qwen/qwen3-4b:free", True),
    ]
    assert len(enforced.decisions) == 1


async def test_enforce_chain_asks_discovery_once_and_not_for_local_chains() -> None:
    discovery = FakeDiscovery([LLAMA_FREE])
    policy = FreeTierPolicy(discovery, registry=CollectorRegistry())
    await enforce_chain(
        policy, [ChainEntry(LLAMA_FREE, "openrouter", 1), ChainEntry(GPT4, "openrouter", 2)]
    )
    assert discovery.calls == 1
    await enforce_chain(policy, [ChainEntry("llama3.1:8b", "ollama", 1)])
    assert discovery.calls == 1


SPEC_FREE_TIER_MODELS = [
    GEMINI,
    "mistralai/mistral-7b-instruct:free",
    "mistralai/devstral-2512:free",
    LLAMA_FREE,
    R1,
    "qwen/qwen3-4b:free",
]


@pytest.mark.spec("LLM-12.3", "LLM-23.1")
async def test_the_whitelist_holds_the_spec_models_and_only_free_ones_pass_for_chat() -> None:
    # The hard-coded list is replaced (spec/README.md): seed defaults + discovery's free list.
    discovery = FakeDiscovery([m for m in SPEC_FREE_TIER_MODELS if m not in seed_cloud_model_ids()])
    policy = FreeTierPolicy(discovery, registry=CollectorRegistry())
    # WHEN the system initializes THEN the whitelist includes at minimum the spec's models
    whitelist = await policy.whitelist()
    assert set(SPEC_FREE_TIER_MODELS) <= set(whitelist)
    assert GPT4 not in whitelist and OPUS not in whitelist
    # AND only these models are allowed for chat endpoints: each passes unchanged ...
    chain = [ChainEntry(m, "openrouter", i + 1) for i, m in enumerate(SPEC_FREE_TIER_MODELS)]
    enforced = await enforce_chain(policy, chain, context="endpoint=/api/chat/deep")
    assert [e.model_id for e in enforced.entries] == SPEC_FREE_TIER_MODELS
    assert not enforced.downgraded
    # ... and anything else is replaced by the default free model
    paid = await enforce_chain(policy, [ChainEntry(GPT4, "openrouter", 1)])
    assert [e.model_id for e in paid.entries] == [GEMINI]
    # Without discovery the seed defaults still pass (the policy fails closed for the rest).
    offline = FreeTierPolicy(FakeDiscovery(fail=True), registry=CollectorRegistry())
    assert set(await offline.whitelist()) == set(SPEC_FREE_TIER_MODELS) - {LLAMA_FREE}


@pytest.mark.spec("LLM-13.2")
async def test_cost_tracking_logs_counts_and_signals_a_downgrade(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from prometheus_client import generate_latest

    registry = CollectorRegistry()
    policy = FreeTierPolicy(FakeDiscovery([]), registry=registry)
    provider = RecordingProvider("openrouter")
    gateway = Gateway({"openrouter": provider}, registry=registry)
    caplog.set_level(logging.WARNING, logger="queries.free_tier")
    # WHEN a non-free model is requested
    enforced = await enforce_chain(
        policy,
        [ChainEntry(OPUS, "openrouter", 1)],
        context="endpoint=/api/chat/deep tenant=acme request_id=r-42",
    )
    result = await gateway.complete("chat_deep", enforced.entries, request(), "/api/chat/deep")
    # THEN the event is logged with the request metadata
    [record] = [r for r in caplog.records if "model downgraded" in r.getMessage()]
    assert "endpoint=/api/chat/deep tenant=acme request_id=r-42" in record.getMessage()
    assert OPUS in record.getMessage()
    # AND a metrics counter is incremented for monitoring (exposed in Prometheus text)
    assert counter(registry, OPUS, GEMINI) == 1
    exposition = generate_latest(registry).decode()
    assert f'chat_model_downgrade_count_total{{from_model="{OPUS}",to_model="{GEMINI}"}} 1.0' in (
        exposition
    )
    # tokens are accounted per provider (free models: tokens, not dollars)
    assert f'llm_prompt_tokens_total{{model="{GEMINI}",provider="openrouter"}} 10.0' in exposition
    usage = gateway.usage_report()["providers"]["openrouter"]
    assert (usage["prompt_tokens"], usage["billing"], usage["cost_usd"]) == (10, "free_tier", 0.0)
    # AND the user receives the response with a header indicating the downgrade
    assert result.model_used == GEMINI
    assert enforced.headers() == {DOWNGRADE_HEADER: f"{OPUS} -> {GEMINI}"}


@pytest.mark.spec("CFG-08")
async def test_no_hardcoded_whitelist_the_free_list_is_what_discovery_reports() -> None:
    # A model no list in the code names is allowed once discovery reports it free ...
    policy = FreeTierPolicy(FakeDiscovery(["newlab/tiny-model:free"]), frozenset())
    fresh = await policy.check(ChainEntry("newlab/tiny-model:free", "openrouter", 1))
    assert fresh.allowed
    # ... and a model of the old hard-coded whitelist is not, once it is no longer free.
    policy = FreeTierPolicy(FakeDiscovery([]), frozenset())
    dropped = await policy.check(ChainEntry(LLAMA_FREE, "openrouter", 1))
    assert not dropped.allowed and dropped.entry.model_id != LLAMA_FREE
