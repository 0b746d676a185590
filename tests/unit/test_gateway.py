"""The LLM gateway on fake providers and a fake clock: every fallback path, the breaker,
metrics, reasoning stripping, streaming and the exhaustion body."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from adapters.llm.extractive import ExtractiveProvider, digest
from domain.llm import (
    AllModelsFailed,
    ChainEntry,
    ChatMessage,
    Completion,
    CompletionRequest,
    EvidenceItem,
    LLMProvider,
    MalformedResponse,
    OutOfMemory,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    ThinkFilter,
    parse_json_object,
    strip_reasoning,
)
from domain.model_config import ModelSelectionUnavailable
from queries.gateway import Gateway, GatewayConfig

pytestmark = pytest.mark.unit

DEEP = "/api/chat/deep"
ANSWER = {"answer": "ok", "evidence": [], "next_actions": [], "warnings": []}
R1 = "deepseek/deepseek-r1-0528:free"
DEVSTRAL = "mistralai/devstral-2512:free"
GEMINI = "google/gemini-2.0-flash-exp:free"


class FakeClock:
    """Wall clock and sleep in one: sleeping advances the clock, and is recorded."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


HANG = object()


class FakeProvider:
    """Answers each model from a script: a str (text), an exception, or HANG (never answers).

    The last behaviour of a model's script repeats.
    """

    def __init__(self, name: str, script: dict[str, list[Any]]) -> None:
        self.name = name
        self.script = script
        self.calls: list[tuple[str, CompletionRequest]] = []

    def _next(self, model: str) -> Any:
        steps = self.script[model]
        return steps.pop(0) if len(steps) > 1 else steps[0]

    async def complete(self, request: CompletionRequest, model: str) -> Completion:
        self.calls.append((model, request))
        step = self._next(model)
        if step is HANG:
            await asyncio.sleep(30)
        if isinstance(step, BaseException):
            raise step
        return Completion(
            text=step,
            model=model,
            provider=self.name,
            prompt_tokens=11,
            completion_tokens=7,
            latency_s=0.001,
        )

    async def stream(self, request: CompletionRequest, model: str) -> AsyncIterator[str]:
        self.calls.append((model, request))
        step = self._next(model)
        if step is HANG:
            await asyncio.sleep(30)
        if isinstance(step, BaseException):
            raise step
        for piece in step:
            if isinstance(piece, BaseException):
                raise piece
            yield piece

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        return [[0.0] for _ in texts]

    async def aclose(self) -> None:
        return None

    def models_called(self) -> list[str]:
        return [m for m, _ in self.calls]


def chain(*models: str, provider: str = "openrouter", **params: Any) -> list[ChainEntry]:
    return [
        ChainEntry(model_id=m, provider=provider, priority=i + 1, parameters=dict(params))
        for i, m in enumerate(models)
    ]


def request(**kwargs: Any) -> CompletionRequest:
    kwargs.setdefault("response_format", "json_object")
    return CompletionRequest(
        messages=(ChatMessage("system", "Return JSON."), ChatMessage("user", "what feeds x?")),
        **kwargs,
    )


def make(
    providers: dict[str, LLMProvider], **config: Any
) -> tuple[Gateway, FakeClock, CollectorRegistry]:
    clock = FakeClock()
    registry = CollectorRegistry()
    gateway = Gateway(
        providers,
        config=GatewayConfig(**config),
        clock=clock,
        sleep=clock.sleep,
        registry=registry,
    )
    return gateway, clock, registry


def metric(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return value or 0.0


OK = json.dumps(ANSWER)


@pytest.mark.spec("LLM-22.1", "CFG-06.3")
async def test_primary_success_returns_at_once_without_fallback() -> None:
    fake = FakeProvider("openrouter", {R1: [OK], DEVSTRAL: [OK]})
    gateway, clock, registry = make({"openrouter": fake})

    result = await gateway.complete("chat_deep", chain(R1, DEVSTRAL), request(), DEEP)

    assert result.model_used == R1 and result.data == ANSWER
    assert fake.models_called() == [R1]  # no fallback model tried
    assert clock.sleeps == []
    assert result.metadata() == {
        "model_used": R1,
        "provider": "openrouter",
        "priority": 1,
        "fallback_count": 0,
    }
    assert (
        registry.get_sample_value(
            "chat_model_fallback_count_total",
            {
                "endpoint": DEEP,
                "from_model": R1,
                "to_model": DEVSTRAL,
                "reason": "rate_limited",
            },
        )
        is None
    )


@pytest.mark.spec("LLM-27.2", "LLM-22.2", "CFG-06.2", "CFG-06.3")
async def test_rate_limit_waits_retry_after_then_next_model_never_the_same(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeProvider("openrouter", {R1: [RateLimited(retry_after=5.0)], DEVSTRAL: [OK]})
    gateway, clock, registry = make({"openrouter": fake})
    caplog.set_level(logging.INFO, logger="queries.gateway")
    req = request()

    result = await gateway.complete("chat_deep", chain(R1, DEVSTRAL, GEMINI), req, DEEP)

    assert fake.models_called() == [R1, DEVSTRAL]  # not the same model again
    assert clock.sleeps == [5.0]  # max(Retry-After=5, 2.0 * 2.0^0)
    assert fake.calls[1][1].messages == req.messages  # same prompt and context
    assert result.model_used == DEVSTRAL
    assert result.metadata() == {
        "model_used": DEVSTRAL,
        "provider": "openrouter",
        "priority": 2,
        "fallback_count": 1,
    }
    # the primary failure is logged server-side but NOT exposed in the client's metadata
    assert result.server_metadata()["primary_error"] == "Rate limit exceeded (429)"
    assert "primary_error=Rate limit exceeded (429)" in caplog.text
    assert (
        metric(
            registry,
            "chat_model_fallback_count_total",
            endpoint=DEEP,
            from_model=R1,
            to_model=DEVSTRAL,
            reason="rate_limited",
        )
        == 1
    )
    logged = caplog.text
    assert f"rate limited model={R1} endpoint={DEEP}" in logged and "retry_after=5.0" in logged
    assert f"from_model={R1} to_model={DEVSTRAL} reason=rate_limited" in logged
    # the primary failure stays server-side: the text the client gets is the answer only
    assert "429" not in result.text


@pytest.mark.spec("LLM-27.2", "LLM-22.3")
async def test_backoff_without_retry_after_is_base_delay_times_factor_power() -> None:
    fake = FakeProvider(
        "openrouter",
        {
            R1: [RateLimited(retry_after=None)],
            DEVSTRAL: [RateLimited(retry_after=1.0)],
            GEMINI: [OK],
        },
    )
    gateway, clock, _ = make({"openrouter": fake})

    result = await gateway.complete("chat_deep", chain(R1, DEVSTRAL, GEMINI), request(), DEEP)

    assert clock.sleeps == [2.0, 4.0]  # 2.0 * 2.0^0, then max(1.0, 2.0 * 2.0^1)
    assert result.model_used == GEMINI and result.priority == 3 and result.fallback_count == 2


async def test_retry_after_longer_than_max_delay_is_capped() -> None:
    fake = FakeProvider("openrouter", {R1: [RateLimited(retry_after=3600.0)], DEVSTRAL: [OK]})
    gateway, clock, _ = make({"openrouter": fake}, max_delay=30.0)
    await gateway.complete("chat_deep", chain(R1, DEVSTRAL), request(), DEEP)
    assert clock.sleeps == [30.0]


@pytest.mark.spec("LLM-27.4")
async def test_service_unavailable_falls_back_at_once_and_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeProvider(
        "openrouter",
        {
            R1: [ProviderUnavailable("Service unavailable (503)", status=503)],
            DEVSTRAL: [OK],
        },
    )
    gateway, clock, registry = make({"openrouter": fake})
    caplog.set_level(logging.WARNING, logger="queries.gateway")

    result = await gateway.complete("chat_deep", chain(R1, DEVSTRAL), request(), DEEP)

    assert clock.sleeps == []  # immediately
    assert fake.models_called() == [R1, DEVSTRAL]  # the same model is not retried
    assert result.model_used == DEVSTRAL
    assert metric(registry, "chat_service_unavailable_count_total", endpoint=DEEP, model=R1) == 1
    assert f"service unavailable model={R1}" in caplog.text


@pytest.mark.spec("LLM-27.3")
async def test_timeout_cancels_waits_backoff_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeProvider("openrouter", {R1: [HANG], DEVSTRAL: [OK]})
    gateway, clock, registry = make({"openrouter": fake}, timeouts={"deep": 0.05})
    caplog.set_level(logging.WARNING, logger="queries.gateway")

    result = await gateway.complete("chat_deep", chain(R1, DEVSTRAL), request(), DEEP)

    assert result.model_used == DEVSTRAL
    assert clock.sleeps == [2.0]  # backoff delay, not an immediate retry
    assert metric(registry, "chat_timeout_count_total", endpoint=DEEP, model=R1) == 1
    assert f"timeout model={R1} endpoint={DEEP}" in caplog.text and "timeout=0.05s" in caplog.text
    assert fake.calls[0][1].timeout == 0.05  # the provider is told its deadline too


async def test_slow_answer_within_timeout_is_not_a_failure() -> None:
    class Slow(FakeProvider):
        async def complete(self, request: CompletionRequest, model: str) -> Completion:
            await asyncio.sleep(0.05)
            return await super().complete(request, model)

    fake = Slow("openrouter", {R1: [OK], DEVSTRAL: [OK]})
    gateway, clock, _ = make({"openrouter": fake}, timeouts={"deep": 1.0})
    result = await gateway.complete("chat_deep", chain(R1, DEVSTRAL), request(), DEEP)
    assert result.model_used == R1 and result.fallback_count == 0 and clock.sleeps == []


@pytest.mark.spec("LLM-27.1")
def test_retry_configuration_defaults_and_per_endpoint_timeouts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = GatewayConfig()
    assert (cfg.base_delay, cfg.backoff_factor) == (2.0, 2.0)
    assert [cfg.backoff(n) for n in (1, 2)] == [2.0, 4.0]
    timeouts = {
        e: cfg.timeout_for(f"/api/chat/{e}") for e in ("deep", "graph", "semantic", "text", "title")
    }
    assert timeouts == {"deep": 90, "graph": 45, "semantic": 45, "text": 30, "title": 30}
    assert cfg.timeout_for("/api/chat/deep/stream") == 90
    assert cfg.timeout_for("kg", "chat_graph") == 45

    from adapters.llm.settings import LLMSettings

    monkeypatch.setenv("LLM_TIMEOUT_DEEP", "120")
    monkeypatch.setenv("LLM_BASE_DELAY", "1.5")
    loaded = GatewayConfig(**LLMSettings().gateway_options())  # type: ignore[call-arg]
    assert loaded.timeout_for("/api/chat/deep") == 120 and loaded.base_delay == 1.5
    assert loaded.backoff_factor == 2.0


@pytest.mark.spec("CFG-06.2")
async def test_parse_failure_when_json_required_goes_to_next_model(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeProvider("openrouter", {R1: ["Sure! Here is the lineage: x <- y"], DEVSTRAL: [OK]})
    gateway, clock, registry = make({"openrouter": fake})
    caplog.set_level(logging.DEBUG, logger="queries.gateway")
    # the chain is taken in priority order, disabled entries left out
    entries = [
        ChainEntry(DEVSTRAL, "openrouter", 2),
        ChainEntry(GEMINI, "openrouter", 1, enabled=False),
        ChainEntry(R1, "openrouter", 1),
    ]

    result = await gateway.complete("chat_deep", entries, request(), DEEP)

    assert fake.models_called() == [R1, DEVSTRAL]
    assert result.model_used == DEVSTRAL and clock.sleeps == [2.0]
    assert metric(registry, "chat_malformed_response_count_total", endpoint=DEEP, model=R1) == 1
    assert (
        metric(
            registry,
            "chat_model_fallback_count_total",
            endpoint=DEEP,
            from_model=R1,
            to_model=DEVSTRAL,
            reason="malformed",
        )
        == 1
    )
    raw_logs = [r for r in caplog.records if r.levelno == logging.DEBUG and "raw" in r.msg]
    assert any(
        "x <- y" in r.getMessage() and f"model={R1} endpoint={DEEP}" in r.getMessage()
        for r in raw_logs
    )
    # the raw text is never part of what a client could see
    assert "x <- y" not in json.dumps(result.metadata())
    assert all("x <- y" not in a.error for a in result.attempts)


async def test_free_text_requests_are_not_parsed() -> None:
    fake = FakeProvider("openrouter", {GEMINI: ["Orders lineage"]})
    gateway, _, _ = make({"openrouter": fake})
    result = await gateway.complete(
        "chat_title", chain(GEMINI), request(response_format=None), "/api/chat/title"
    )
    assert result.text == "Orders lineage" and result.data is None


async def test_json_schema_required_keys_are_checked() -> None:
    schema = {"type": "object", "required": ["answer", "evidence", "next_actions", "warnings"]}
    fake = FakeProvider("openrouter", {R1: ['{"answer": "x"}'], DEVSTRAL: [OK]})
    gateway, _, _ = make({"openrouter": fake})
    result = await gateway.complete(
        "chat_deep", chain(R1, DEVSTRAL), request(response_format=schema), DEEP
    )
    assert result.model_used == DEVSTRAL
    assert (
        result.attempts[0].error == "Malformed response (missing keys: evidence, "
        "next_actions, warnings)"
    )


@pytest.mark.spec("LLM-22.3", "CFG-06.2", "LLM-27.2", "LLM-27.3", "LLM-27.4")
async def test_exhaustion_raises_the_spec_503_body() -> None:
    fake = FakeProvider(
        "openrouter",
        {
            R1: [RateLimited(retry_after=None)],
            DEVSTRAL: [HANG],
            GEMINI: [ProviderUnavailable("Service unavailable (503)", status=503)],
        },
    )
    gateway, clock, registry = make({"openrouter": fake}, timeouts={"deep": 0.05})

    with pytest.raises(AllModelsFailed) as caught:
        await gateway.complete("chat_deep", chain(R1, DEVSTRAL, GEMINI), request(), DEEP)

    body = caught.value.body()
    assert caught.value.http_status == 503
    assert body["error"] == "All free-tier models exhausted for this endpoint"
    assert body["endpoint"] == DEEP and body["retry_after"] == 120
    assert [(a["model"], a["error"]) for a in body["attempts"]] == [
        (R1, "Rate limit exceeded (429)"),
        (DEVSTRAL, "Timeout after 0.05s"),
        (GEMINI, "Service unavailable (503)"),
    ]
    assert all(
        a["timestamp"].endswith("Z") and a["timestamp"][:4] == "2027" for a in body["attempts"]
    )
    assert clock.sleeps == [2.0, 4.0]  # 2.0s, then 2.0 * 2.0^1; no wait after the last
    assert metric(registry, "chat_all_models_failed_total", endpoint=DEEP) == 1
    json.dumps(body)  # serialisable as is


@pytest.mark.spec("CFG-05.2", "CFG-05.3", "CFG-10.2")
async def test_empty_or_disabled_chain_is_not_configured_never_a_hardcoded_model() -> None:
    fake = FakeProvider("openrouter", {GEMINI: [OK]})
    gateway, _, _ = make({"openrouter": fake})

    with pytest.raises(ModelSelectionUnavailable) as empty:
        await gateway.complete("chat_deep", [], request(), DEEP)
    body = empty.value.body()
    assert {k: body[k] for k in ("error", "usage_type", "action")} == {
        "error": "No models configured",
        "usage_type": "chat_deep",
        "action": "Configure models via frontend",
    }

    disabled = [ChainEntry(GEMINI, "openrouter", 1, enabled=False)]
    with pytest.raises(ModelSelectionUnavailable) as off:
        await gateway.complete("chat_text", disabled, request(), "/api/chat/text")
    body = off.value.body()
    assert {k: body[k] for k in ("error", "usage_type", "action")} == {
        "error": "All models disabled",
        "usage_type": "chat_text",
        "action": "Enable at least one model via frontend",
    }
    assert fake.calls == []  # no hard-coded fallback model was called


async def test_circuit_breaker_skips_a_cooling_model_without_calling_it() -> None:
    fake = FakeProvider(
        "openrouter",
        {
            R1: [RateLimited(retry_after=10.0), OK],
            DEVSTRAL: [OK],
        },
    )
    gateway, clock, registry = make({"openrouter": fake}, rate_limit_cooldown=60.0)
    entries = chain(R1, DEVSTRAL)

    await gateway.complete("chat_deep", entries, request(), DEEP)
    assert fake.models_called() == [R1, DEVSTRAL]
    clock.sleeps.clear()

    second = await gateway.complete("chat_deep", entries, request(), DEEP)
    assert fake.models_called() == [R1, DEVSTRAL, DEVSTRAL]  # R1 not called
    assert clock.sleeps == []
    assert second.model_used == DEVSTRAL and second.fallback_count == 1
    assert second.attempts[0].reason == "circuit_open"
    assert (
        metric(
            registry,
            "chat_model_fallback_count_total",
            endpoint=DEEP,
            from_model=R1,
            to_model=DEVSTRAL,
            reason="circuit_open",
        )
        == 1
    )

    clock.now += 61  # the cooldown has passed: R1 is tried again and closes its circuit
    third = await gateway.complete("chat_deep", entries, request(), DEEP)
    assert third.model_used == R1 and fake.models_called()[-1] == R1


async def test_every_model_cooling_is_exhaustion_without_any_call() -> None:
    fake = FakeProvider("openrouter", {R1: [RateLimited(retry_after=None)]})
    gateway, _, _ = make({"openrouter": fake})
    with pytest.raises(AllModelsFailed):
        await gateway.complete("chat_deep", chain(R1), request(), DEEP)
    with pytest.raises(AllModelsFailed) as again:
        await gateway.complete("chat_deep", chain(R1), request(), DEEP)
    assert len(fake.calls) == 1
    assert again.value.attempts[0].reason == "circuit_open"


@pytest.mark.spec("LLM-26.1", "CFG-07.2")
async def test_strict_json_is_sent_unless_reasoning_mode() -> None:
    fake = FakeProvider("openrouter", {R1: [OK], DEVSTRAL: [OK]})
    gateway, _, _ = make({"openrouter": fake})

    await gateway.complete(
        "chat_deep", chain(R1, temperature=0.6, max_tokens=2048), request(), DEEP
    )
    sent = fake.calls[-1][1]
    assert sent.response_format == "json_object"
    assert (sent.temperature, sent.max_tokens) == (0.6, 2048)

    await gateway.complete("chat_deep", chain(DEVSTRAL, reasoning_mode=True), request(), DEEP)
    assert fake.calls[-1][1].response_format is None  # thinking allowed, output still parsed


@pytest.mark.spec("LLM-26.1", "LLM-26.2")
async def test_think_tokens_are_stripped_logged_at_debug_and_only_json_returned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    leaked = "<think>The user wants lineage; recall stg_orders.</think>\n" + OK
    fake = FakeProvider("openrouter", {R1: [leaked]})
    gateway, _, _ = make({"openrouter": fake})
    caplog.set_level(logging.DEBUG, logger="queries.gateway")

    result = await gateway.complete("chat_deep", chain(R1), request(), DEEP)

    assert result.data == ANSWER and "<think>" not in result.text and "recall" not in result.text
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("recall stg_orders" in m and f"model={R1} endpoint={DEEP}" in m for m in debug)
    assert not any("recall" in r.getMessage() for r in caplog.records if r.levelno > logging.DEBUG)

    # thinking that still breaks the JSON makes the parser fail: the next model answers
    broken = FakeProvider(
        "openrouter", {R1: ["<think>hmm</think> The answer is x"], DEVSTRAL: [OK]}
    )
    gateway2, _, _ = make({"openrouter": broken})
    fallback = await gateway2.complete("chat_deep", chain(R1, DEVSTRAL), request(), DEEP)
    assert fallback.model_used == DEVSTRAL


@pytest.mark.spec("LLM-34.3")
async def test_tokens_are_counted_per_provider() -> None:
    remote = FakeProvider("openrouter", {GEMINI: [OK]})
    local = FakeProvider("ollama", {"llama3.1:8b": [OK]})
    gateway, _, registry = make({"openrouter": remote, "ollama": local})
    entries = [ChainEntry("llama3.1:8b", "ollama", 1), ChainEntry(GEMINI, "openrouter", 2)]

    await gateway.complete("chat_text", entries, request(), "/api/chat/text")
    await gateway.complete("chat_text", chain(GEMINI), request(), "/api/chat/text")

    assert gateway.usage["ollama"].prompt == 11 and gateway.usage["ollama"].completion == 7
    assert gateway.usage["openrouter"].calls == 1
    assert metric(registry, "llm_prompt_tokens_total", provider="openrouter", model=GEMINI) == 11
    assert (
        metric(registry, "llm_completion_tokens_total", provider="ollama", model="llama3.1:8b") == 7
    )


@pytest.mark.spec("LLM-34.1", "LLM-34.3")
async def test_hybrid_rule_prefers_ollama_for_small_prompts_only() -> None:
    local = FakeProvider("ollama", {"llama3.1:8b": [OK]})
    remote = FakeProvider("groq", {"llama-3.1-8b-instant": [OK]})
    healthy = {"ollama": True}
    clock = FakeClock()
    gateway = Gateway(
        {"ollama": local, "groq": remote},
        clock=clock,
        sleep=clock.sleep,
        provider_health=lambda name: healthy.get(name, True),
    )
    entries = [
        ChainEntry("llama3.1:8b", "ollama", 1),
        ChainEntry("llama-3.1-8b-instant", "groq", 2),
    ]

    small = await gateway.complete("inference", entries, request(), "inference")
    assert small.provider == "ollama"

    big = CompletionRequest(
        messages=(ChatMessage("user", "x" * 13_000),), response_format="json_object"
    )
    routed = await gateway.complete("inference", entries, big, "inference")
    assert routed.provider == "groq" and len(local.calls) == 1  # not called for 3000+ tokens
    assert routed.attempts[0].reason == "context_too_large"

    healthy["ollama"] = False  # degraded health: fallback provider
    degraded = await gateway.complete("inference", entries, request(), "inference")
    assert degraded.provider == "groq" and len(local.calls) == 1


@pytest.mark.spec("LLM-34.2")
async def test_ollama_out_of_memory_retries_on_the_fallback_provider_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    local = FakeProvider("ollama", {"llama3.1:8b": [OutOfMemory("Out of memory (500)")]})
    remote = FakeProvider("openrouter", {GEMINI: [OK]})
    gateway, clock, _ = make({"ollama": local, "openrouter": remote})
    caplog.set_level(logging.WARNING, logger="queries.gateway")
    entries = [ChainEntry("llama3.1:8b", "ollama", 1), ChainEntry(GEMINI, "openrouter", 2)]

    result = await gateway.complete("inference", entries, request(), "inference")

    assert result.provider == "openrouter" and result.metadata()["provider"] == "openrouter"
    assert clock.sleeps == []
    assert "out of memory model=llama3.1:8b" in caplog.text
    assert "query_tokens~" in caplog.text and "error_type=OutOfMemory" in caplog.text


def test_chain_entries_from_read_model_rows() -> None:
    row = {
        "model_id": R1,
        "provider": "openrouter",
        "priority": 1,
        "enabled": True,
        "parameters": '{"reasoning_mode": true, "temperature": 0.6}',
    }
    entry = ChainEntry.from_row(row)
    assert (entry.model_id, entry.priority, entry.reasoning_mode, entry.streaming) == (
        R1,
        1,
        True,
        True,
    )
    assert (
        ChainEntry.from_row({**row, "parameters": {"max_tokens": 10}}).parameter("max_tokens") == 10
    )


async def test_unknown_provider_entry_is_skipped() -> None:
    fake = FakeProvider("openrouter", {GEMINI: [OK]})
    gateway, _, _ = make({"openrouter": fake})
    entries = [ChainEntry("x", "groq", 1), ChainEntry(GEMINI, "openrouter", 2)]
    result = await gateway.complete("chat_text", entries, request(), "/api/chat/text")
    assert result.model_used == GEMINI
    assert result.attempts[0].error == "Provider 'groq' is not configured"


async def test_a_provider_bug_is_a_failure_not_a_crash() -> None:
    fake = FakeProvider("openrouter", {R1: [KeyError("boom")], DEVSTRAL: [OK]})
    gateway, _, _ = make({"openrouter": fake})
    result = await gateway.complete("chat_deep", chain(R1, DEVSTRAL), request(), DEEP)
    assert result.model_used == DEVSTRAL
    assert result.attempts[0].error == "Provider error (KeyError)"


async def test_max_attempts_limits_the_calls() -> None:
    fake = FakeProvider(
        "openrouter",
        {m: [ProviderUnavailable("Service unavailable (503)")] for m in (R1, DEVSTRAL, GEMINI)},
    )
    gateway, _, _ = make({"openrouter": fake}, max_attempts=2)
    with pytest.raises(AllModelsFailed):
        await gateway.complete("chat_deep", chain(R1, DEVSTRAL, GEMINI), request(), DEEP)
    assert fake.models_called() == [R1, DEVSTRAL]


# --- streaming -------------------------------------------------------------------------


async def collect(stream: AsyncIterator[str]) -> str:
    return "".join([piece async for piece in stream])


async def test_stream_falls_back_before_the_first_token_and_strips_think() -> None:
    fake = FakeProvider(
        "openrouter",
        {
            R1: [ProviderUnavailable("Service unavailable (503)")],
            DEVSTRAL: [["<thi", "nk>secret plan</th", "ink>Hel", "lo ", "world"]],
        },
    )
    gateway, _, registry = make({"openrouter": fake})

    stream = await gateway.stream("chat_deep", chain(R1, DEVSTRAL), request(), DEEP)
    assert stream.model_used == DEVSTRAL and stream.metadata()["fallback_count"] == 1
    assert await collect(stream) == "Hello world"
    assert fake.calls[-1][1].stream is True
    assert (
        metric(
            registry,
            "chat_model_fallback_count_total",
            endpoint=DEEP,
            from_model=R1,
            to_model=DEVSTRAL,
            reason="unavailable",
        )
        == 1
    )
    assert gateway.usage["openrouter"].completion > 0


async def test_stream_timeout_before_first_token_falls_back() -> None:
    fake = FakeProvider("openrouter", {R1: [HANG], DEVSTRAL: [["ok"]]})
    gateway, clock, registry = make({"openrouter": fake}, timeouts={"deep": 0.05})
    stream = await gateway.stream("chat_deep", chain(R1, DEVSTRAL), request(), DEEP)
    assert await collect(stream) == "ok"
    assert clock.sleeps == [2.0]
    assert metric(registry, "chat_timeout_count_total", endpoint=DEEP, model=R1) == 1


async def test_stream_empty_then_exhaustion() -> None:
    fake = FakeProvider("openrouter", {R1: [[]]})
    gateway, _, _ = make({"openrouter": fake})
    with pytest.raises(AllModelsFailed) as caught:
        await gateway.stream("chat_deep", chain(R1), request(), DEEP)
    assert caught.value.attempts[0].error == "Malformed response (empty stream)"


async def test_stream_error_after_first_token_reaches_the_caller_no_fallback() -> None:
    fake = FakeProvider(
        "openrouter",
        {
            R1: [["Hel", ProviderUnavailable("Connection to openrouter failed (ReadError)")]],
            DEVSTRAL: [["never"]],
        },
    )
    gateway, _, registry = make({"openrouter": fake})
    stream = await gateway.stream("chat_deep", chain(R1, DEVSTRAL), request(), DEEP)
    seen: list[str] = []
    with pytest.raises(ProviderUnavailable):
        async for piece in stream:
            seen.append(piece)
    assert seen == ["Hel"] and fake.models_called() == [R1]
    assert metric(registry, "chat_service_unavailable_count_total", endpoint=DEEP, model=R1) == 1


# --- pure helpers and the extractive provider --------------------------------------------


def test_strip_reasoning_variants() -> None:
    assert strip_reasoning("<think>a</think>{}") == ("{}", "a")
    assert strip_reasoning('plan</think> {"a": 1}') == ('{"a": 1}', "plan")
    assert strip_reasoning("{} <think>unfinished") == ("{}", "unfinished")
    assert strip_reasoning("plain") == ("plain", "")


def test_parse_json_object_accepts_fences_and_rejects_non_objects() -> None:
    assert parse_json_object('```json\n{"a": 1}\n```') == {"a": 1}
    with pytest.raises(ValueError, match="not an object"):
        parse_json_object("[1, 2]")
    with pytest.raises(ValueError, match="not JSON"):
        parse_json_object("nope")


def test_think_filter_across_chunk_boundaries() -> None:
    f = ThinkFilter()
    out = "".join(f.feed(c) for c in ["a<", "think>b</thi", "nk>c<", "x"]) + f.flush()
    assert out == "ac<x" and "".join(f.reasoning) == "b"


async def test_extractive_answers_in_the_chat_shape_from_the_evidence_only() -> None:
    evidence = (
        EvidenceItem("graph", "urn:li:table:shop:stg_orders", "raw.orders -[FEEDS]-> stg_orders"),
        EvidenceItem(
            "chunk", "urn:li:file:shop:models/stg_orders.sql", "select id, amount from raw.orders"
        ),
    )
    req = CompletionRequest(
        messages=(ChatMessage("user", "What feeds customer_summary and net_revenue?"),),
        response_format="json_object",
        evidence=evidence,
    )
    gateway, _, _ = make({"extractive": ExtractiveProvider()})
    result = await gateway.complete(
        "chat_deep", [ChainEntry("extractive", "extractive", 1)], req, DEEP
    )
    data = result.data
    assert data is not None
    assert set(data) == {"answer", "evidence", "next_actions", "warnings"}
    assert [(e["type"], e["id"]) for e in data["evidence"]] == [(i.type, i.id) for i in evidence]
    assert data["evidence"][1]["note"] == "select id, amount from raw.orders"
    # nothing absent from the evidence is claimed: the question's names are not echoed as facts
    assert "customer_summary" not in result.text and "net_revenue" not in result.text
    assert digest("q", evidence) == digest("q", evidence)  # deterministic
    empty = digest("What feeds x?", ())
    assert empty["evidence"] == [] and "No evidence" in empty["answer"]
    with pytest.raises(Exception, match="no embeddings"):
        await ExtractiveProvider().embed(["x"], "extractive")


def test_typed_errors_keep_raw_text_out_of_the_message() -> None:
    err = MalformedResponse("Malformed response (not JSON)", raw="<html>secret page</html>")
    assert "secret" not in str(err) and "secret" not in json.dumps(err.to_dict())
    assert ProviderTimeout(timeout=30).message == "Timeout after 30s"
    assert RateLimited(retry_after=3).to_dict()["code"] == "rate_limited"


# --- hybrid inference: the configured fallback, local timeouts ---------------------------

LLAMA = "llama3.1:8b"
FALLBACK = ChainEntry(GEMINI, "openrouter", 1)


@pytest.mark.spec("LLM-34.3")
async def test_the_inference_fallback_serves_local_only_chains_for_large_prompts() -> None:
    local = FakeProvider("ollama", {LLAMA: [OK], "nomic-embed-text": [OK]})
    remote = FakeProvider("openrouter", {GEMINI: [OK], DEVSTRAL: [OK]})
    gateway, _, _ = make({"ollama": local, "openrouter": remote}, inference_fallback=FALLBACK)
    only_local = [ChainEntry(LLAMA, "ollama", 1)]

    small = await gateway.complete("inference", only_local, request(), "inference")
    assert small.provider == "ollama" and remote.calls == []  # Ollama preferred (free)
    big = CompletionRequest(messages=(ChatMessage("user", "x" * 13_000),))
    routed = await gateway.complete("inference", only_local, big, "inference")
    assert (routed.model_used, routed.priority) == (GEMINI, 2)  # appended after the chain
    assert routed.attempts[0].reason == "context_too_large" and len(local.calls) == 1

    # a chain with its own remote entry keeps it; embeddings never get another model
    mixed = [ChainEntry(LLAMA, "ollama", 1), ChainEntry(DEVSTRAL, "openrouter", 2)]
    assert (await gateway.complete("inference", mixed, big, "inference")).model_used == DEVSTRAL
    embedding = [ChainEntry("nomic-embed-text", "ollama", 1)]
    assert (await gateway.complete("embedding", embedding, big, "embedding")).provider == "ollama"


async def test_a_local_timeout_with_a_fallback_after_it_falls_back_instead_of_retrying() -> None:
    local = FakeProvider("ollama", {LLAMA: [HANG]})
    remote = FakeProvider("openrouter", {GEMINI: [OK], R1: [HANG]})
    gateway, clock, _ = make(
        {"ollama": local, "openrouter": remote}, default_timeout=0.05, unavailable_cooldown=0
    )
    entries = [ChainEntry(LLAMA, "ollama", 1), ChainEntry(GEMINI, "openrouter", 2)]
    result = await gateway.complete("inference", entries, request(), "inference")
    assert result.provider == "openrouter" and clock.sleeps == [2.0]
    assert local.models_called() == [LLAMA]
    # a remote model's timeout is never retried on the same model
    with pytest.raises(AllModelsFailed):
        await gateway.complete("inference", chain(R1), request(), "inference")
    assert remote.models_called().count(R1) == 1


async def test_try_complete_is_none_when_nothing_is_configured() -> None:
    gateway, _, _ = make({})
    assert await gateway.try_complete("kg_edge_creation", [], request(), "kg") is None
    disabled = [ChainEntry(GEMINI, "openrouter", 1, enabled=False)]
    assert await gateway.try_complete("kg_edge_creation", disabled, request(), "kg") is None
