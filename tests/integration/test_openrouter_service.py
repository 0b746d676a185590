"""The OpenRouter service of llm-service.md ("Zero-Cost Inference"), as built here: the
`openrouter` provider from the environment, the free-tier policy, and the gateway's fail-open
`try_complete` that lineage inference uses (a failure is logged and yields nothing, so the
deterministic lineage carries on), against the scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import CollectorRegistry

from adapters.llm.openai_compatible import OpenAICompatibleProvider
from adapters.llm.settings import LLMSettings, build_llm_providers
from domain.llm import ChainEntry, ChatMessage, CompletionRequest
from queries.free_tier import DEFAULT_FREE_MODEL, FreeTierPolicy, seed_cloud_model_ids
from queries.gateway import Gateway, GatewayConfig
from tests.integration.test_llm_providers import Reply, ScriptedServer, chat_ok

pytestmark = pytest.mark.integration

KEY = "sk-or-v1-service-test-key"
DEVSTRAL = "mistralai/devstral-2512:free"
GEMINI = "google/gemini-2.0-flash-exp:free"
KG_CHAIN = [ChainEntry(DEVSTRAL, "openrouter", 1), ChainEntry(GEMINI, "openrouter", 2)]
SYSTEM = "You propose lineage edges. Reply with one JSON object only, no prose."
PROPOSALS = '{"proposals": [{"source_node": "raw.orders", "target_node": "stg_orders"}]}'


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def lineage_request() -> CompletionRequest:
    return CompletionRequest(
        messages=(
            ChatMessage("system", SYSTEM),
            ChatMessage("user", "insert into stg_orders select * from raw.orders"),
        ),
        response_format="json_object",
        max_tokens=512,
    )


def gateway_for(server: ScriptedServer) -> tuple[Gateway, OpenAICompatibleProvider]:
    provider = OpenAICompatibleProvider("openrouter", server.url, api_key=KEY)
    config = GatewayConfig(base_delay=0.01, max_delay=0.05)
    return Gateway({"openrouter": provider}, config=config, registry=CollectorRegistry()), provider


@pytest.mark.spec("LLM-10.1")
async def test_initialization_needs_the_key_uses_httpx_and_the_free_defaults(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.setenv("OPENROUTER_BASE_URL", server.url)
    caplog.set_level(logging.INFO, logger="adapters.llm.settings")
    # THEN it requires OPENROUTER_API_KEY from the environment
    assert "openrouter" not in build_llm_providers(LLMSettings())  # type: ignore[call-arg]
    assert "without an API key (not used): openrouter" in caplog.text
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    provider = build_llm_providers(LLMSettings())["openrouter"]  # type: ignore[call-arg]
    # AND initializes an httpx async client for HTTP calls (bearer key, lazily)
    assert isinstance(provider, OpenAICompatibleProvider)
    client = provider.client
    assert isinstance(client, httpx.AsyncClient)
    assert client.headers["Authorization"] == f"Bearer {KEY}"
    server.on(GEMINI, chat_ok('{"ok": true}'))
    await Gateway({"openrouter": provider}).complete(
        "inference", [ChainEntry(GEMINI, "openrouter", 1)], lineage_request(), "inference"
    )
    await provider.aclose()
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    # AND loads the free-tier whitelist (seed defaults, plus discovery) AND sets the default
    policy = FreeTierPolicy(None, registry=CollectorRegistry())
    assert {GEMINI, DEVSTRAL} <= set(await policy.whitelist()) == seed_cloud_model_ids()
    assert policy.default_model == DEFAULT_FREE_MODEL == GEMINI
    assert LLMSettings().free_tier_default_model == GEMINI  # type: ignore[call-arg]


@pytest.mark.spec("LLM-10.3")
async def test_json_only_mode_non_json_answers_are_logged_as_errors_and_yield_nothing(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.on(DEVSTRAL, chat_ok("Sure! raw.orders feeds stg_orders."))
    server.on(GEMINI, chat_ok("<html>not json</html>"))
    gateway, provider = gateway_for(server)
    caplog.set_level(logging.INFO, logger="queries.gateway")
    try:
        result = await gateway.try_complete(
            "kg_edge_creation", KG_CHAIN, lineage_request(), "kg_edge_creation"
        )
    finally:
        await provider.aclose()
    # THEN the request carries response_format json_object AND the JSON-only system prompt
    for sent in server.requests:
        assert sent["body"]["response_format"] == {"type": "json_object"}
        assert sent["body"]["messages"][0] == {"role": "system", "content": SYSTEM}
    # AND a non-JSON response is caught and logged as an error
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    [failed] = [e for e in errors if "no model answered usage_type=kg_edge_creation" in e]
    assert "Malformed response" in failed and "Sure!" not in failed
    # AND nothing is returned on the parsing failure (fail-open: the caller has no proposals)
    assert result is None

    server.on(DEVSTRAL, chat_ok(PROPOSALS))
    gateway, provider = gateway_for(server)
    answered = await gateway.try_complete(
        "kg_edge_creation", KG_CHAIN, lineage_request(), "kg_edge_creation"
    )
    await provider.aclose()
    assert answered is not None and answered.data is not None
    assert answered.data["proposals"][0]["target_node"] == "stg_orders"


@pytest.mark.spec("LLM-10.5")
async def test_rate_limit_is_logged_fails_open_and_opens_the_circuit(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.on(DEVSTRAL, Reply(429, b'{"error": "rate"}', {"Retry-After": "30"}))
    server.on(GEMINI, Reply(429, b'{"error": "rate"}'))
    gateway, provider = gateway_for(server)
    caplog.set_level(logging.WARNING, logger="queries.gateway")
    try:
        # THEN the service catches the error and logs it AND returns nothing (no crash)
        first = await gateway.try_complete("kg_edge_creation", KG_CHAIN, lineage_request(), "kg")
        assert first is None
        assert f"rate limited model={DEVSTRAL} endpoint=kg" in caplog.text
        assert "retry_after=30.0" in caplog.text
        # AND the circuit breaker opens: the next request does not call the cooling models
        second = await gateway.try_complete("kg_edge_creation", KG_CHAIN, lineage_request(), "kg")
        assert second is None
    finally:
        await provider.aclose()
    assert server.calls(DEVSTRAL) == 1 and server.calls(GEMINI) == 1
    assert "Skipped: cooling down after rate limit" in caplog.text


@pytest.mark.spec("LLM-10.6")
async def test_service_unavailable_is_logged_and_fails_open(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.on(DEVSTRAL, Reply(503, b"maintenance"))
    server.on(GEMINI, Reply(503, b"maintenance"))
    gateway, provider = gateway_for(server)
    caplog.set_level(logging.WARNING, logger="queries.gateway")
    try:
        result = await gateway.try_complete("kg_edge_creation", KG_CHAIN, lineage_request(), "kg")
    finally:
        await provider.aclose()
    # THEN the error is caught and logged AND nothing is returned (fail-open)
    assert result is None
    assert f"service unavailable model={DEVSTRAL} endpoint=kg" in caplog.text
    assert any(
        r.levelno == logging.ERROR and "Service unavailable (503)" in r.getMessage()
        for r in caplog.records
    )
    # no configuration at all is the same for the caller: nothing, logged
    assert await gateway.try_complete("kg_edge_creation", [], lineage_request(), "kg") is None
    assert "KG edge creation model not configured" in caplog.text
