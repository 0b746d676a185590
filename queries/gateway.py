"""The LLM gateway: runs a usage type's fallback chain over the providers.

Rules (llm-service.md "Resilient LLM gateway", "Model fallback routing"; model-config.md
CFG-05/CFG-06):

- The chain comes from configuration (enabled entries, by priority). Empty: "No models
  configured"; every entry disabled: "All models disabled" (the 503 errors of
  `domain.model_config`). Never a hard-coded fallback.
- 429: wait `max(Retry-After, base_delay * backoff_factor^(n-1))` (capped by `max_delay`), then
  the next model; the same model is not retried, and its circuit opens for a cooldown so that
  the next request skips it without calling it.
- 503/502/connection refused, and out-of-memory: the next model at once.
- Timeout (per endpoint: 90 s deep, 45 s graph/semantic, 30 s text/title): backoff, then next.
- Parse failure when JSON was required (and any other provider refusal): backoff, then next.
- Exhaustion: `AllModelsFailed` with the spec's 503 body (attempts, retry_after: 120).
- Strict JSON: `response_format` is sent unless the entry's `reasoning_mode` is true;
  `<think>...</think>` is stripped from every answer (and logged at DEBUG).
- Streaming falls back only before the first token.
- Hybrid inference: a chain holding Ollama but nothing remote after it gets the configured
  `INFERENCE_FALLBACK_PROVIDER` entry appended (not for embeddings: another vector space).
- Ollama timeouts with nothing left to fall back to are retried on the same model: 3 times,
  2/4/8 s apart (llm-service.md "Ollama timeout during query"), then the 503.
- Temperature: the entry's parameters; an entry without one (a model override, the inference
  fallback) takes the endpoint's (`CHAT_<ENDPOINT>_TEMPERATURE`, llm-service.md LLM-24.2).
- Client-safe metadata: `GatewayResult.metadata()` carries no failure detail (LLM-22.2); the
  primary model's error is in `server_metadata()` and in the model-usage log line (CFG-06.3).
- `try_complete` is the fail-open form (the KG agent's "empty list on failure").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from domain.llm import (
    AllModelsFailed,
    Attempt,
    ChainEntry,
    Completion,
    CompletionRequest,
    LLMProvider,
    MalformedResponse,
    OutOfMemory,
    ProviderError,
    ProviderRequestFailed,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    ThinkFilter,
    parse_json_object,
    strip_reasoning,
)
from domain.model_config import ModelSelectionUnavailable, all_disabled, not_configured

log = logging.getLogger(__name__)

_SKIP_REASONS = frozenset(
    {"circuit_open", "not_configured", "context_too_large", "unhealthy", "max_attempts"}
)

DEFAULT_TIMEOUTS: Mapping[str, float] = {
    "deep": 90.0,
    "graph": 45.0,
    "semantic": 45.0,
    "text": 30.0,
    "title": 30.0,
}
# llm-service.md "Default models per endpoint with temperature settings" (LLM-24.2).
DEFAULT_TEMPERATURES: Mapping[str, float] = {
    "deep": 0.6,
    "graph": 0.1,
    "semantic": 0.2,
    "text": 0.3,
    "title": 0.2,
}
# Usage types whose chain never gets the inference fallback appended (other vector space).
_NO_INFERENCE_FALLBACK = frozenset({"embedding"})
# Providers that bill nothing: local servers and the extractive digest (free_tier.py agrees).
LOCAL_BILLING: frozenset[str] = frozenset({"ollama", "openai_compatible", "extractive"})


@dataclass(frozen=True)
class GatewayConfig:
    base_delay: float = 2.0
    backoff_factor: float = 2.0
    max_delay: float = 60.0
    timeouts: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TIMEOUTS))
    default_timeout: float = 60.0
    # After a 429 the model is skipped for max(Retry-After, rate_limit_cooldown) seconds.
    rate_limit_cooldown: float = 60.0
    # After 503/connection failure/timeout/OOM the model is skipped this long (0: never).
    unavailable_cooldown: float = 15.0
    # Hybrid inference: local providers are skipped for prompts of this many tokens or more
    # when a non-local entry follows in the chain (None: never).
    local_token_limit: int | None = 3000
    local_providers: tuple[str, ...] = ("ollama",)
    exhausted_retry_after: int = 120
    # At most this many models called per request (None: the whole chain).
    max_attempts: int | None = None
    # Per endpoint, for entries whose parameters set no temperature.
    temperatures: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TEMPERATURES))
    # Appended to chains that hold a local model and nothing remote (INFERENCE_FALLBACK_*).
    inference_fallback: ChainEntry | None = None
    # Timeouts of a local model with nothing after it in the chain: retried this many times.
    local_timeout_retries: int = 3

    def backoff(self, n: int) -> float:
        """The wait before fallback number `n` (1 for the first): base * factor^(n-1)."""
        return min(self.max_delay, self.base_delay * self.backoff_factor ** max(0, n - 1))

    def timeout_for(self, endpoint: str, usage_type: str = "") -> float:
        for key in (_endpoint_key(endpoint), _endpoint_key(usage_type)):
            if key in self.timeouts:
                return self.timeouts[key]
        return self.default_timeout

    def temperature_for(self, endpoint: str, usage_type: str = "") -> float | None:
        """The endpoint's temperature (None for usage types that are not a chat endpoint)."""
        for key in (_endpoint_key(endpoint), _endpoint_key(usage_type)):
            if key in self.temperatures:
                return self.temperatures[key]
        return None


def _endpoint_key(name: str) -> str:
    """`/api/chat/deep`, `/api/chat/deep/stream`, `chat_deep`, `deep` -> `deep`."""
    parts = [p for p in name.strip("/").split("/") if p and p != "stream"]
    last = parts[-1] if parts else ""
    return last.removeprefix("chat_")


@dataclass(frozen=True)
class GatewayResult:
    text: str
    data: dict[str, Any] | None
    model_used: str
    provider: str
    priority: int
    fallback_count: int
    primary_error: str | None
    attempts: tuple[Attempt, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    def metadata(self) -> dict[str, Any]:
        """The response metadata a client may see: model_used, provider, priority,
        fallback_count. No failure detail: the primary failure stays server-side (LLM-22.2)."""
        return _client_metadata(self.model_used, self.provider, self.priority, self.fallback_count)

    def server_metadata(self) -> dict[str, Any]:
        """`metadata()` plus `primary_error` after a fallback (model-config.md "Log model
        usage") and the attempts: for logs and operators, never for a client response."""
        return _server_metadata(self.metadata(), self.primary_error, self.attempts)


def _client_metadata(model: str, provider: str, priority: int, fallbacks: int) -> dict[str, Any]:
    return {
        "model_used": model,
        "provider": provider,
        "priority": priority,
        "fallback_count": fallbacks,
    }


def _server_metadata(
    meta: dict[str, Any], primary_error: str | None, attempts: Sequence[Attempt]
) -> dict[str, Any]:
    server = dict(meta)
    if meta["fallback_count"] and primary_error:
        server["primary_error"] = primary_error
    server["attempts"] = [
        {**a.to_dict(), "provider": a.provider, "priority": a.priority, "reason": a.reason}
        for a in attempts
    ]
    return server


@dataclass
class TokenUsage:
    prompt: int = 0
    completion: int = 0
    calls: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
        }


class GatewayMetrics:
    """Prometheus counters, registered on the registry passed in (a private one otherwise)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        reg = registry if registry is not None else CollectorRegistry()
        self.registry = reg
        self.fallback = Counter(
            "chat_model_fallback_count",
            "Fallbacks from one model to the next",
            ["endpoint", "from_model", "to_model", "reason"],
            registry=reg,
        )
        self.timeout = Counter(
            "chat_timeout_count", "Model calls that timed out", ["endpoint", "model"], registry=reg
        )
        self.unavailable = Counter(
            "chat_service_unavailable_count",
            "Model calls answered 503 or unreachable",
            ["endpoint", "model"],
            registry=reg,
        )
        self.rate_limited = Counter(
            "chat_rate_limited_count",
            "Model calls answered 429",
            ["endpoint", "model"],
            registry=reg,
        )
        self.all_failed = Counter(
            "chat_all_models_failed",
            "Requests for which every model failed",
            ["endpoint"],
            registry=reg,
        )
        self.malformed = Counter(
            "chat_malformed_response_count",
            "Model answers that could not be parsed",
            ["endpoint", "model"],
            registry=reg,
        )
        self.prompt_tokens = Counter(
            "llm_prompt_tokens",
            "Prompt tokens sent, per provider and model",
            ["provider", "model"],
            registry=reg,
        )
        self.completion_tokens = Counter(
            "llm_completion_tokens",
            "Completion tokens received, per provider and model",
            ["provider", "model"],
            registry=reg,
        )
        self.requests = Counter(
            "llm_requests",
            "Model calls answered, per provider and model",
            ["provider", "model"],
            registry=reg,
        )


class CircuitBreaker:
    """Per-model cooldowns: an open model is skipped without being called until it cools."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._open: dict[str, tuple[float, str]] = {}

    def trip(self, key: str, seconds: float, reason: str) -> None:
        if seconds <= 0:
            return
        until = self._clock() + seconds
        current = self._open.get(key)
        if current is None or current[0] < until:
            self._open[key] = (until, reason)

    def cooling(self, key: str) -> tuple[float, str] | None:
        """(seconds left, reason) while `key` is open; None when it may be called."""
        entry = self._open.get(key)
        if entry is None:
            return None
        left = entry[0] - self._clock()
        if left <= 0:
            del self._open[key]
            return None
        return left, entry[1]

    def reset(self, key: str) -> None:
        self._open.pop(key, None)


class _Run:
    """The state of one request going through a chain."""

    def __init__(self, usage_type: str, endpoint: str, entries: list[ChainEntry]) -> None:
        self.usage_type = usage_type
        self.endpoint = endpoint
        self.entries = entries
        self.attempts: list[Attempt] = []
        self.failures = 0
        self.called = 0
        self.pending_delay = 0.0


class Gateway:
    """Runs a chain of `ChainEntry` over `providers` (name -> `LLMProvider`)."""

    def __init__(
        self,
        providers: Mapping[str, LLMProvider],
        *,
        config: GatewayConfig | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        registry: CollectorRegistry | None = None,
        provider_health: Callable[[str], bool] | None = None,
        model_resolver: Callable[[ChainEntry], str] | None = None,
    ) -> None:
        self.providers = dict(providers)
        self.config = config or GatewayConfig()
        self._clock = clock
        self._sleep = sleep
        self.metrics = GatewayMetrics(registry)
        self.breaker = CircuitBreaker(clock)
        self._health = provider_health
        # The name to call for an entry (Ollama's quantized variant, OLLAMA_USE_QUANTIZED).
        self._resolve = model_resolver
        self.usage: dict[str, TokenUsage] = {}
        self.usage_by_model: dict[tuple[str, str], TokenUsage] = {}
        self.started_at = clock()

    async def aclose(self) -> None:
        """Close every provider's HTTP client (at shutdown)."""
        for provider in self.providers.values():
            await provider.aclose()

    # --- the non-streaming path -------------------------------------------------------

    async def complete(
        self,
        usage_type: str,
        chain: Sequence[ChainEntry],
        request: CompletionRequest,
        endpoint: str,
    ) -> GatewayResult:
        run = _Run(usage_type, endpoint, self._chain(usage_type, chain))
        timeout = request.timeout or self.config.timeout_for(endpoint, usage_type)
        for index in range(len(run.entries)):
            provider = await self._admit(run, index, request)
            if provider is None:
                continue
            result = await self._complete_entry(run, index, provider, request, timeout)
            if result is not None:
                self._log_usage(run, result)
                return result
        raise self._exhausted(run)

    async def try_complete(
        self,
        usage_type: str,
        chain: Sequence[ChainEntry],
        request: CompletionRequest,
        endpoint: str,
    ) -> GatewayResult | None:
        """Fail-open `complete`: None (logged at ERROR) when no model answered or none is
        configured, for callers that carry on without a model (the KG agent's proposals:
        llm-service.md "JSON-only response mode", "Rate limit handling")."""
        try:
            return await self.complete(usage_type, chain, request, endpoint)
        except AllModelsFailed as error:
            log.error(
                "no model answered usage_type=%s endpoint=%s (fail-open, nothing returned): %s",
                usage_type,
                endpoint,
                "; ".join(f"{a.model}: {a.error}" for a in error.attempts),
            )
        except ModelSelectionUnavailable as error:
            log.error(
                "no model configured usage_type=%s endpoint=%s (fail-open): %s",
                usage_type,
                endpoint,
                error.message,
            )
        return None

    async def _complete_entry(
        self,
        run: _Run,
        index: int,
        provider: LLMProvider,
        request: CompletionRequest,
        timeout: float,  # noqa: ASYNC109 - enforced in _call
    ) -> GatewayResult | None:
        """Call one entry (again after a local timeout, see `_may_retry`); None: it failed."""
        entry = run.entries[index]
        call = self._request_for(entry, request, timeout, run)
        retries = 0
        while True:
            failure: ProviderError
            try:
                completion = await self._call(provider, entry, call, timeout)
                self._account(completion, entry)
                text, data = self._finish(completion, entry, request, run.endpoint)
                self.breaker.reset(entry.key)
                return GatewayResult(
                    text=text,
                    data=data,
                    model_used=entry.model_id,
                    provider=entry.provider,
                    priority=entry.priority,
                    fallback_count=index,
                    primary_error=run.attempts[0].error if run.attempts else None,
                    attempts=tuple(run.attempts),
                    prompt_tokens=completion.prompt_tokens,
                    completion_tokens=completion.completion_tokens,
                    latency_s=completion.latency_s,
                )
            except ProviderError as exc:
                failure = exc
            except Exception as exc:  # a provider bug must not take the chain down
                log.exception("provider %s raised unexpectedly", entry.provider)
                failure = _unexpected(exc, entry)
            self._failed(run, entry, failure, request)
            if not self._may_retry(run, index, failure, retries):
                return None
            retries += 1
            delay = self.config.backoff(retries)
            log.warning(
                "retrying model=%s provider=%s endpoint=%s after a timeout of %ss: "
                "retry %d of %d in %.1fs (nothing to fall back to)",
                entry.model_id,
                entry.provider,
                run.endpoint,
                timeout,
                retries,
                self.config.local_timeout_retries,
                delay,
            )
            run.pending_delay = 0.0
            await self._sleep(delay)

    def _may_retry(self, run: _Run, index: int, failure: ProviderError, retries: int) -> bool:
        """Only a local model's timeout, when it is the chain's last entry, and within the
        retry budget: everywhere else the chain's next model is the retry."""
        entry = run.entries[index]
        return (
            isinstance(failure, ProviderTimeout)
            and entry.provider in self.config.local_providers
            and index == len(run.entries) - 1
            and retries < self.config.local_timeout_retries
        )

    def _log_usage(self, run: _Run, result: GatewayResult) -> None:
        """model-config.md "Log model usage": one line per answered request (server-side)."""
        meta = result.server_metadata()
        log.info(
            "model usage usage_type=%s endpoint=%s model_used=%s provider=%s priority=%d "
            "fallback_count=%d primary_error=%s prompt_tokens=%d completion_tokens=%d",
            run.usage_type,
            run.endpoint,
            result.model_used,
            result.provider,
            result.priority,
            result.fallback_count,
            meta.get("primary_error"),
            result.prompt_tokens,
            result.completion_tokens,
        )

    # --- the streaming path -----------------------------------------------------------

    async def stream(
        self,
        usage_type: str,
        chain: Sequence[ChainEntry],
        request: CompletionRequest,
        endpoint: str,
    ) -> GatewayStream:
        """Open a stream on the first model that produces a first token within the timeout.

        Falls back only before the first token; later failures reach the caller (as the
        typed provider errors) when it iterates the returned `GatewayStream`.
        """
        run = _Run(usage_type, endpoint, self._chain(usage_type, chain))
        timeout = request.timeout or self.config.timeout_for(endpoint, usage_type)
        for index, entry in enumerate(run.entries):
            provider = await self._admit(run, index, request)
            if provider is None:
                continue
            call = replace(self._request_for(entry, request, timeout, run), stream=True)
            tokens = provider.stream(call, self._model_for(entry))
            try:
                async with asyncio.timeout(timeout):
                    first = await anext(tokens)
            except StopAsyncIteration:
                await _aclose(tokens)
                self._failed(
                    run,
                    entry,
                    MalformedResponse(
                        "Malformed response (empty stream)",
                        provider=entry.provider,
                        model=entry.model_id,
                    ),
                    request,
                )
                continue
            except TimeoutError:
                await _aclose(tokens)
                self._failed(
                    run,
                    entry,
                    ProviderTimeout(timeout=timeout, provider=entry.provider, model=entry.model_id),
                    request,
                )
                continue
            except ProviderError as exc:
                await _aclose(tokens)
                self._failed(run, entry, exc, request)
                continue
            except Exception as exc:
                await _aclose(tokens)
                log.exception("provider %s raised unexpectedly", entry.provider)
                self._failed(run, entry, _unexpected(exc, entry), request)
                continue
            return GatewayStream(
                self,
                entry,
                first,
                tokens,
                timeout,
                request,
                endpoint,
                fallback_count=index,
                attempts=tuple(run.attempts),
            )
        raise self._exhausted(run)

    # --- steps ------------------------------------------------------------------------

    def _chain(self, usage_type: str, chain: Sequence[ChainEntry]) -> list[ChainEntry]:
        if not chain:
            raise not_configured(usage_type)
        enabled = sorted((e for e in chain if e.enabled), key=lambda e: e.priority)
        if not enabled:
            raise all_disabled(usage_type)
        return self._with_inference_fallback(usage_type, enabled)

    def _with_inference_fallback(
        self, usage_type: str, entries: list[ChainEntry]
    ) -> list[ChainEntry]:
        """Hybrid inference: a chain of local models only gets the configured remote
        fallback (INFERENCE_FALLBACK_PROVIDER) as its last entry."""
        fallback = self.config.inference_fallback
        local = self.config.local_providers
        if (
            fallback is None
            or usage_type in _NO_INFERENCE_FALLBACK
            or not any(e.provider in local for e in entries)
            or any(e.provider not in local for e in entries)
        ):
            return entries
        return [*entries, replace(fallback, priority=entries[-1].priority + 1)]

    def _model_for(self, entry: ChainEntry) -> str:
        return self._resolve(entry) if self._resolve is not None else entry.model_id

    async def _admit(self, run: _Run, index: int, request: CompletionRequest) -> LLMProvider | None:
        """The provider to call for entry `index`, after the pending backoff; None: skipped."""
        entry = run.entries[index]
        if index:
            previous = run.entries[index - 1]
            reason = run.attempts[-1].reason if run.attempts else "error"
            self._count_fallback(run, previous, entry, reason)
        skip = self._skip(run, index, request)
        provider = self.providers.get(entry.provider)
        if skip is None and provider is None:
            skip = ("not_configured", f"Provider {entry.provider!r} is not configured")
        if skip is not None:
            log.info(
                "skipping model=%s provider=%s endpoint=%s usage_type=%s: %s",
                entry.model_id,
                entry.provider,
                run.endpoint,
                run.usage_type,
                skip[1],
            )
            run.attempts.append(self._attempt(entry, skip[0], skip[1]))
            return None
        if run.pending_delay > 0:
            await self._sleep(run.pending_delay)
        run.pending_delay = 0.0
        run.called += 1
        return provider

    def _skip(self, run: _Run, index: int, request: CompletionRequest) -> tuple[str, str] | None:
        entry = run.entries[index]
        cfg = self.config
        if cfg.max_attempts is not None and run.called >= cfg.max_attempts:
            return "max_attempts", f"Skipped: {cfg.max_attempts} models already tried"
        cooling = self.breaker.cooling(entry.key)
        if cooling is not None:
            left, why = cooling
            return "circuit_open", f"Skipped: cooling down after {why} ({left:.0f}s left)"
        later = run.entries[index + 1 :]
        if entry.provider in cfg.local_providers and any(
            e.provider not in cfg.local_providers for e in later
        ):
            tokens = request.estimated_prompt_tokens()
            if cfg.local_token_limit is not None and tokens >= cfg.local_token_limit:
                return (
                    "context_too_large",
                    f"Skipped: ~{tokens} prompt tokens >= {cfg.local_token_limit} for a "
                    "local model",
                )
            if self._health is not None and not self._health(entry.provider):
                return "unhealthy", f"Skipped: {entry.provider} health is degraded"
        return None

    def _request_for(
        self, entry: ChainEntry, request: CompletionRequest, timeout: float, run: _Run
    ) -> CompletionRequest:
        params = entry.parameters
        temperature = params.get("temperature")
        if temperature is None:
            temperature = self.config.temperature_for(run.endpoint, run.usage_type)
        return replace(
            request,
            max_tokens=int(params.get("max_tokens", request.max_tokens)),
            temperature=float(request.temperature if temperature is None else temperature),
            # reasoning_mode lets the model think: no JSON constraint is sent (we still parse).
            response_format=None if entry.reasoning_mode else request.response_format,
            timeout=timeout,
        )

    async def _call(
        self,
        provider: LLMProvider,
        entry: ChainEntry,
        request: CompletionRequest,
        timeout: float,  # noqa: ASYNC109 - enforced with asyncio.timeout below
    ) -> Completion:
        try:
            async with asyncio.timeout(timeout):
                return await provider.complete(request, self._model_for(entry))
        except TimeoutError:
            raise ProviderTimeout(
                timeout=timeout, provider=entry.provider, model=entry.model_id
            ) from None

    def _finish(
        self,
        completion: Completion,
        entry: ChainEntry,
        request: CompletionRequest,
        endpoint: str,
    ) -> tuple[str, dict[str, Any] | None]:
        text, reasoning = strip_reasoning(completion.text)
        if reasoning:
            log.debug(
                "reasoning stripped model=%s endpoint=%s raw=%r",
                entry.model_id,
                endpoint,
                completion.text,
            )
        if not request.wants_json:
            return text, None
        schema = request.response_format if isinstance(request.response_format, dict) else None
        try:
            data = parse_json_object(text, schema)
        except ValueError as exc:
            raise MalformedResponse(
                f"Malformed response ({exc})",
                raw=completion.text,
                provider=entry.provider,
                model=entry.model_id,
            ) from None
        return text, data

    def _account(self, completion: Completion, entry: ChainEntry) -> None:
        self.record_tokens(
            entry.provider,
            entry.model_id,
            completion.prompt_tokens,
            completion.completion_tokens,
        )

    def record_tokens(self, provider: str, model: str, prompt: int, completion: int) -> None:
        """Count tokens per provider (free providers are tracked in tokens, not dollars)."""
        for usage in (
            self.usage.setdefault(provider, TokenUsage()),
            self.usage_by_model.setdefault((provider, model), TokenUsage()),
        ):
            usage.prompt += prompt
            usage.completion += completion
            usage.calls += 1
        self.metrics.requests.labels(provider, model).inc()
        if prompt:
            self.metrics.prompt_tokens.labels(provider, model).inc(prompt)
        if completion:
            self.metrics.completion_tokens.labels(provider, model).inc(completion)

    def usage_report(self) -> dict[str, Any]:
        """Token accounting per provider and model since this process started.

        Local providers and the free-tier cloud models the policy lets through cost nothing:
        they are accounted in tokens, and `cost_usd` is 0 (`billing` says why)."""
        providers: dict[str, dict[str, Any]] = {}
        for (provider, model), usage in sorted(self.usage_by_model.items()):
            entry = providers.setdefault(
                provider,
                {
                    **self.usage[provider].to_dict(),
                    "billing": "local" if provider in LOCAL_BILLING else "free_tier",
                    "cost_usd": 0.0,
                    "models": {},
                },
            )
            entry["models"][model] = usage.to_dict()
        totals = TokenUsage(
            prompt=sum(u.prompt for u in self.usage.values()),
            completion=sum(u.completion for u in self.usage.values()),
            calls=sum(u.calls for u in self.usage.values()),
        )
        since = datetime.fromtimestamp(self.started_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {
            "since": since,
            "providers": providers,
            "totals": {**totals.to_dict(), "cost_usd": 0.0},
            "unit": "tokens",
        }

    def _failed(
        self, run: _Run, entry: ChainEntry, exc: ProviderError, request: CompletionRequest
    ) -> None:
        run.failures += 1
        run.attempts.append(self._attempt(entry, exc.reason, exc.message))
        self.note_failure(entry, exc, run.endpoint, run.usage_type, request)
        cfg = self.config
        if isinstance(exc, (ProviderUnavailable, OutOfMemory)):
            run.pending_delay = 0.0  # 503: the next model at once
        elif isinstance(exc, RateLimited):
            run.pending_delay = min(
                cfg.max_delay, max(exc.retry_after or 0.0, cfg.backoff(run.failures))
            )
        else:
            run.pending_delay = cfg.backoff(run.failures)

    def note_failure(
        self,
        entry: ChainEntry,
        exc: ProviderError,
        endpoint: str,
        usage_type: str,
        request: CompletionRequest | None = None,
    ) -> None:
        """Log, count and trip the breaker for one failed call (streams call this too)."""
        cfg = self.config
        model, at = entry.model_id, self._timestamp()
        if isinstance(exc, RateLimited):
            self.metrics.rate_limited.labels(endpoint, model).inc()
            self.breaker.trip(
                entry.key, max(exc.retry_after or 0.0, cfg.rate_limit_cooldown), "rate limit"
            )
            log.warning(
                "rate limited model=%s endpoint=%s usage_type=%s retry_after=%s at=%s",
                model,
                endpoint,
                usage_type,
                exc.retry_after,
                at,
            )
        elif isinstance(exc, ProviderTimeout):
            self.metrics.timeout.labels(endpoint, model).inc()
            self.breaker.trip(entry.key, cfg.unavailable_cooldown, "timeout")
            log.warning(
                "timeout model=%s endpoint=%s usage_type=%s timeout=%ss at=%s",
                model,
                endpoint,
                usage_type,
                exc.timeout,
                at,
            )
        elif isinstance(exc, ProviderUnavailable):
            self.metrics.unavailable.labels(endpoint, model).inc()
            self.breaker.trip(entry.key, cfg.unavailable_cooldown, "service unavailable")
            log.warning(
                "service unavailable model=%s endpoint=%s usage_type=%s: %s",
                model,
                endpoint,
                usage_type,
                exc.message,
            )
        elif isinstance(exc, OutOfMemory):
            self.breaker.trip(entry.key, cfg.unavailable_cooldown, "out of memory")
            size = request.estimated_prompt_tokens() if request is not None else -1
            log.warning(
                "out of memory model=%s provider=%s endpoint=%s query_tokens~%d error_type=%s",
                model,
                entry.provider,
                endpoint,
                size,
                type(exc).__name__,
            )
        elif isinstance(exc, MalformedResponse):
            self.metrics.malformed.labels(endpoint, model).inc()
            log.warning(
                "malformed response model=%s endpoint=%s usage_type=%s: %s (%d chars)",
                model,
                endpoint,
                usage_type,
                exc.message,
                len(exc.raw),
            )
            log.debug("raw response model=%s endpoint=%s raw=%r", model, endpoint, exc.raw)
        else:
            log.warning(
                "model call failed model=%s endpoint=%s usage_type=%s: %s",
                model,
                endpoint,
                usage_type,
                exc.message,
            )

    def _count_fallback(
        self, run: _Run, previous: ChainEntry, entry: ChainEntry, reason: str
    ) -> None:
        self.metrics.fallback.labels(run.endpoint, previous.model_id, entry.model_id, reason).inc()
        # A skip (cooling circuit, routing rule) was already logged when it was decided.
        level = logging.INFO if reason in _SKIP_REASONS else logging.WARNING
        log.log(
            level,
            "fallback usage_type=%s endpoint=%s from_model=%s to_model=%s reason=%s",
            run.usage_type,
            run.endpoint,
            previous.model_id,
            entry.model_id,
            reason,
        )

    def _exhausted(self, run: _Run) -> AllModelsFailed:
        self.metrics.all_failed.labels(run.endpoint).inc()
        log.error(
            "all models failed usage_type=%s endpoint=%s attempts=%s",
            run.usage_type,
            run.endpoint,
            [(a.model, a.reason) for a in run.attempts],
        )
        return AllModelsFailed(
            run.usage_type, run.endpoint, run.attempts, self.config.exhausted_retry_after
        )

    def _attempt(self, entry: ChainEntry, reason: str, error: str) -> Attempt:
        return Attempt(
            model=entry.model_id,
            provider=entry.provider,
            priority=entry.priority,
            reason=reason,
            error=error,
            timestamp=self._timestamp(),
        )

    def _timestamp(self) -> str:
        return datetime.fromtimestamp(self._clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class GatewayStream:
    """An open stream: metadata now, text deltas (reasoning removed) when iterated."""

    def __init__(
        self,
        gateway: Gateway,
        entry: ChainEntry,
        first: str,
        tokens: AsyncIterator[str],
        timeout: float,
        request: CompletionRequest,
        endpoint: str,
        *,
        fallback_count: int,
        attempts: tuple[Attempt, ...],
    ) -> None:
        self._gateway = gateway
        self.entry = entry
        self._first: str | None = first
        self._tokens = tokens
        self._timeout = timeout
        self._request = request
        self._endpoint = endpoint
        self.fallback_count = fallback_count
        self.attempts = attempts
        self.text_chars = 0

    @property
    def model_used(self) -> str:
        return self.entry.model_id

    @property
    def provider(self) -> str:
        return self.entry.provider

    @property
    def priority(self) -> int:
        return self.entry.priority

    @property
    def primary_error(self) -> str | None:
        return self.attempts[0].error if self.attempts else None

    def metadata(self) -> dict[str, Any]:
        """Client-safe, as `GatewayResult.metadata()`."""
        return _client_metadata(self.model_used, self.provider, self.priority, self.fallback_count)

    def server_metadata(self) -> dict[str, Any]:
        """With `primary_error` and the attempts: server-side only."""
        return _server_metadata(self.metadata(), self.primary_error, self.attempts)

    async def __aiter__(self) -> AsyncIterator[str]:
        think = ThinkFilter()
        raw_chars = 0
        try:
            if self._first is not None:
                first, self._first = self._first, None
                raw_chars += len(first)
                if out := think.feed(first):
                    self.text_chars += len(out)
                    yield out
            while True:
                try:
                    async with asyncio.timeout(self._timeout):
                        delta = await anext(self._tokens)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    exc = ProviderTimeout(
                        timeout=self._timeout, provider=self.provider, model=self.model_used
                    )
                    self._gateway.note_failure(self.entry, exc, self._endpoint, "", self._request)
                    raise exc from None
                except ProviderError as exc:
                    self._gateway.note_failure(self.entry, exc, self._endpoint, "", self._request)
                    raise
                raw_chars += len(delta)
                if out := think.feed(delta):
                    self.text_chars += len(out)
                    yield out
            if rest := think.flush():
                self.text_chars += len(rest)
                yield rest
            self._gateway.breaker.reset(self.entry.key)
        finally:
            await _aclose(self._tokens)
            if think.reasoning:
                log.debug(
                    "reasoning stripped from stream model=%s endpoint=%s raw=%r",
                    self.model_used,
                    self._endpoint,
                    "".join(think.reasoning),
                )
            # Streams seldom report usage: count an estimate (4 characters a token).
            self._gateway.record_tokens(
                self.provider,
                self.model_used,
                self._request.estimated_prompt_tokens(),
                raw_chars // 4,
            )


def _unexpected(exc: Exception, entry: ChainEntry) -> ProviderError:
    return ProviderRequestFailed(
        f"Provider error ({type(exc).__name__})", provider=entry.provider, model=entry.model_id
    )


async def _aclose(iterator: AsyncIterator[str]) -> None:
    close = getattr(iterator, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # closing a failed stream must not hide the failure
            log.debug("closing a provider stream failed", exc_info=True)
