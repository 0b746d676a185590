"""Language-model value objects, the typed provider errors and the `LLMProvider` port.

Pure: no I/O. Providers live in `adapters/llm/`; the gateway that runs a usage type's fallback
chain over them lives in `queries/gateway.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from domain.errors import InvalidCommand, ServiceUnavailable, UpstreamError, _register

Role = Literal["system", "user", "assistant"]
# None: free text. "json_object": any JSON object. A dict: a JSON schema the object must follow.
ResponseFormat = Literal["json_object"] | dict[str, Any] | None

PROVIDERS: tuple[str, ...] = ("ollama", "openrouter", "groq", "openai_compatible", "extractive")
# Parameter defaults of a model configuration (model-config.md, "Parameters JSON structure").
DEFAULT_PARAMETERS: Mapping[str, Any] = {
    "streaming": True,
    "reasoning_mode": False,
    "max_tokens": 4096,
    "temperature": 0.3,
}


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class EvidenceItem:
    """One piece of retrieved evidence handed to the model (and to the extractive provider).

    `type` is `graph`, `chunk` or `doc`; `id` is its URN; `text` the excerpt or graph path.
    """

    type: str
    id: str
    text: str


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """What to ask a model. `timeout` (seconds) is set by the gateway per endpoint."""

    messages: tuple[ChatMessage, ...]
    max_tokens: int = 4096
    temperature: float = 0.3
    response_format: ResponseFormat = None
    stream: bool = False
    timeout: float | None = None
    evidence: tuple[EvidenceItem, ...] = ()

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError("a completion request needs at least one message")
        if self.max_tokens <= 0:
            raise ValueError("max_tokens must be positive")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError("temperature must be within 0.0-2.0")
        if isinstance(self.response_format, str) and self.response_format != "json_object":
            raise ValueError("response_format is None, 'json_object' or a JSON schema dict")

    @property
    def wants_json(self) -> bool:
        return self.response_format is not None

    @property
    def question(self) -> str:
        """The last user message (what the person asked)."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.content
        return ""

    def estimated_prompt_tokens(self) -> int:
        """A cheap estimate (4 characters a token), for routing decisions only."""
        return sum(len(m.content) for m in self.messages) // 4 + 4 * len(self.messages)


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    model: str
    provider: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ChainEntry:
    """One model configuration of a usage type's fallback chain, as the read model supplies it."""

    model_id: str
    provider: str
    priority: int
    parameters: Mapping[str, Any] = field(default_factory=dict)
    enabled: bool = True

    def parameter(self, name: str) -> Any:
        return self.parameters.get(name, DEFAULT_PARAMETERS.get(name))

    @property
    def reasoning_mode(self) -> bool:
        return bool(self.parameter("reasoning_mode"))

    @property
    def streaming(self) -> bool:
        return bool(self.parameter("streaming"))

    @property
    def key(self) -> str:
        return f"{self.provider}:{self.model_id}"

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ChainEntry:
        """An entry from a `model_configs` read-model row (parameters as a dict or JSON)."""
        raw = row.get("parameters") or {}
        parameters = json.loads(raw) if isinstance(raw, str) else dict(raw)
        return cls(
            model_id=str(row["model_id"]),
            provider=str(row["provider"]),
            priority=int(row["priority"]),
            parameters=parameters,
            enabled=bool(row.get("enabled", True)),
        )


# --- provider errors ---------------------------------------------------------------------


class ProviderError(UpstreamError):
    """A provider call failed. Messages never carry secrets nor the model's raw output."""

    code = "provider_error"
    hint = "The service falls back to the next configured model; check the provider's status."
    reason: ClassVar[str] = "error"

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        model: str = "",
        status: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.provider = provider
        self.model = model
        self.status = status


class RateLimited(ProviderError):
    code = "rate_limited"
    hint = "The provider's rate limit was hit; wait for Retry-After or add another model."
    reason = "rate_limited"

    def __init__(
        self,
        message: str = "Rate limit exceeded (429)",
        *,
        retry_after: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, status=kwargs.pop("status", 429), **kwargs)
        self.retry_after = retry_after


class ProviderUnavailable(ProviderError):
    """503/502/504 or the connection could not be made or was cut."""

    code = "provider_unavailable"
    hint = "Check that the provider is running and reachable at its configured base URL."
    reason = "unavailable"


class ProviderTimeout(ProviderError):
    code = "provider_timeout"
    hint = "The model did not answer in time; raise the endpoint's timeout or add a faster model."
    reason = "timeout"

    def __init__(self, message: str = "", *, timeout: float | None = None, **kwargs: Any) -> None:
        text = message or (f"Timeout after {timeout:g}s" if timeout is not None else "Timeout")
        super().__init__(text, **kwargs)
        self.timeout = timeout


class MalformedResponse(ProviderError):
    """The body could not be read, or JSON was required and the output was not JSON.

    `raw` keeps the provider's text for DEBUG logging only: it is never shown to clients.
    """

    code = "malformed_response"
    hint = "The model's output could not be parsed; the service tries the next model."
    reason = "malformed"

    def __init__(
        self, message: str = "Malformed response", *, raw: str = "", **kwargs: Any
    ) -> None:
        super().__init__(message, **kwargs)
        self.raw = raw


class OutOfMemory(ProviderError):
    code = "out_of_memory"
    hint = "The local model ran out of memory; use a quantized model or a remote fallback."
    reason = "oom"


class ProviderRequestFailed(ProviderError):
    """Any other refusal (400, 401, 403, 404, 500...)."""

    code = "provider_request_failed"
    hint = "Check the model id and the provider's API key in the configuration."


class CapabilityUnsupported(ProviderError):
    code = "capability_unsupported"
    hint = "Configure a provider that supports this operation (e.g. embeddings: ollama)."


# --- gateway errors ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Attempt:
    """One link of a chain as the gateway went through it (server-side record)."""

    model: str
    provider: str
    priority: int
    reason: str
    error: str
    timestamp: str

    def to_dict(self) -> dict[str, str]:
        return {"model": self.model, "error": self.error, "timestamp": self.timestamp}


class AllModelsFailed(UpstreamError):
    """Every model of the chain failed or was cooling down: 503 with the attempts."""

    code = "all_models_failed"
    hint = "Every configured model failed; retry after `retry_after` seconds."
    http_status: ClassVar[int] = 503

    def __init__(
        self, usage_type: str, endpoint: str, attempts: Sequence[Attempt], retry_after: int = 120
    ) -> None:
        super().__init__("All free-tier models exhausted for this endpoint")
        self.usage_type = usage_type
        self.endpoint = endpoint
        self.attempts = list(attempts)
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        return {
            "error": self.message,
            "endpoint": self.endpoint,
            "usage_type": self.usage_type,
            "attempts": [a.to_dict() for a in self.attempts],
            "retry_after": self.retry_after,
        }


# --- model override validation (rag-service.md "Model Validation") -----------------------


class ModelNotAllowed(InvalidCommand):
    """A requested model is not in the allowlist (the configured models). HTTP 400."""

    code = "model_not_allowed"
    hint = "Choose one of the configured models (GET /api/v1/models/config), or configure it."


class ModelUnavailable(ServiceUnavailable):
    """An allowed Ollama model is not pulled. HTTP 503."""

    code = "model_unavailable"
    hint = "Pull the model into Ollama (`ollama pull <model>`), then retry."


class LLMConnectionError(ServiceUnavailable):
    """Ollama could not be reached to check a model. HTTP 503."""

    code = "llm_connection_error"
    hint = "Start Ollama (`ollama serve`) and check OLLAMA_BASE_URL."


_register(ModelNotAllowed, ModelUnavailable, LLMConnectionError)


# --- the port ----------------------------------------------------------------------------


@runtime_checkable
class LLMProvider(Protocol):
    """A chat model API (Ollama, OpenAI-compatible servers, the extractive digest).

    Methods raise the `ProviderError` subclasses above and nothing else for provider faults.
    Nothing connects before the first call.
    """

    @property
    def name(self) -> str:
        """The provider name used in chain entries: ollama, openrouter, groq, ..."""

    async def complete(self, request: CompletionRequest, model: str) -> Completion: ...

    def stream(self, request: CompletionRequest, model: str) -> AsyncIterator[str]:
        """Text deltas as the model produces them (an async generator)."""

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        """Vectors in input order; `CapabilityUnsupported` where the provider has none."""

    async def aclose(self) -> None:
        """Release the HTTP client, if one was opened."""


# --- pure helpers for model output -------------------------------------------------------

_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(.*?)\n?```\s*$", re.DOTALL)


def strip_reasoning(text: str) -> tuple[str, str]:
    """Split `<think>...</think>` reasoning (DeepSeek R1 style) from the answer.

    Returns (answer, reasoning). An unterminated `<think>` swallows the rest; a lone
    `</think>` (the opening tag was in the prompt template) drops what precedes it.
    """
    thoughts = [m.group(1) for m in _THINK.finditer(text)]
    answer = _THINK.sub("", text)
    lower = answer.lower()
    if "</think>" in lower:
        cut = lower.rindex("</think>")
        thoughts.append(answer[:cut])
        answer = answer[cut + len("</think>") :]
        lower = answer.lower()
    if "<think>" in lower:
        cut = lower.index("<think>")
        thoughts.append(answer[cut + len("<think>") :])
        answer = answer[:cut]
    return answer.strip(), "\n".join(t.strip() for t in thoughts if t.strip())


def parse_json_object(text: str, schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Parse a model's JSON object (code fences allowed); check the schema's required keys.

    Raises ValueError with a short reason (never the text itself).
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValueError(f"JSON {type(value).__name__}, not an object")
    required = schema.get("required", []) if schema else []
    missing = [k for k in required if isinstance(k, str) and k not in value]
    if missing:
        raise ValueError(f"missing keys: {', '.join(missing)}")
    return value


class ThinkFilter:
    """Drops `<think>...</think>` from a stream of text deltas, tags split across deltas too."""

    _OPEN = "<think>"
    _CLOSE = "</think>"

    def __init__(self) -> None:
        self._buffer = ""
        self._inside = False
        self.reasoning: list[str] = []

    def feed(self, delta: str) -> str:
        self._buffer += delta
        out: list[str] = []
        while True:
            tag = self._CLOSE if self._inside else self._OPEN
            at = self._buffer.lower().find(tag)
            if at >= 0:
                part, self._buffer = self._buffer[:at], self._buffer[at + len(tag) :]
                (self.reasoning if self._inside else out).append(part)
                self._inside = not self._inside
                continue
            keep = _partial_suffix(self._buffer.lower(), tag)
            cut = len(self._buffer) - keep
            part, self._buffer = self._buffer[:cut], self._buffer[cut:]
            (self.reasoning if self._inside else out).append(part)
            return "".join(out)

    def flush(self) -> str:
        rest, self._buffer = self._buffer, ""
        if self._inside:
            self.reasoning.append(rest)
            return ""
        return rest


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0
