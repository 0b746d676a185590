"""Free-tier enforcement for cloud models (spec/README.md "Free-tier enforcement").

A cloud entry (provider `openrouter` or `groq`) is allowed when its model is free according to
discovery (OpenRouter's `pricing.prompt == "0"` and `pricing.completion == "0"`, the discovery
cache of an hour) or when it is one of the seed defaults (`domain.model_config.DEFAULT_SEED`).
Anything else is downgraded to the configured default free model (an `openrouter` entry keeping
its priority and parameters), logged at WARNING with the original model and the reason, counted
in `chat_model_downgrade_count{from_model,to_model}`, and signalled in the response: the
`X-Model-Downgraded` header and the `model_downgraded` / `downgrades` metadata keys.

Local providers (`ollama`, `openai_compatible`, `extractive`) cost nothing and are always
allowed. When discovery cannot answer (no network and nothing cached) only the seed defaults
pass: the policy fails closed. Groq has no pricing discovery, so a Groq model passes only as a
seed default.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter

from domain.llm import ChainEntry
from domain.model_config import DEFAULT_SEED

log = logging.getLogger(__name__)

CLOUD_PROVIDERS: frozenset[str] = frozenset({"openrouter", "groq"})
DEFAULT_FREE_MODEL = "google/gemini-2.0-flash-exp:free"
DEFAULT_FREE_PROVIDER = "openrouter"
DOWNGRADE_HEADER = "X-Model-Downgraded"
META_DOWNGRADED = "model_downgraded"
META_DOWNGRADES = "downgrades"

REASON_LOCAL = "local provider"
REASON_FREE = "free according to OpenRouter discovery"
REASON_SEED = "seed default"
REASON_NOT_FREE = "not free according to OpenRouter discovery"
REASON_NO_DISCOVERY = "free-model discovery unavailable and not a seed default"


class FreeModelSource(Protocol):
    """What the policy needs of discovery (adapters.model_discovery.ModelDiscovery)."""

    async def openrouter_free_models(self) -> dict[str, Any]: ...


def seed_cloud_model_ids() -> frozenset[str]:
    """The cloud model ids of the `default` seed profile."""
    return frozenset(
        model
        for _, entries in DEFAULT_SEED
        for model, provider, _ in entries
        if provider in CLOUD_PROVIDERS
    )


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict on one chain entry: `entry` is what runs (the original when allowed)."""

    original: ChainEntry
    entry: ChainEntry
    allowed: bool
    reason: str

    @property
    def downgraded(self) -> bool:
        return not self.allowed

    def to_dict(self) -> dict[str, Any]:
        return {
            "from_model": self.original.model_id,
            "from_provider": self.original.provider,
            "to_model": self.entry.model_id,
            "to_provider": self.entry.provider,
            "reason": self.reason,
        }


class DowngradeMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.downgrades = Counter(
            "chat_model_downgrade_count",
            "Cloud models replaced by the default free model (not free)",
            ["from_model", "to_model"],
            registry=registry if registry is not None else CollectorRegistry(),
        )


class FreeTierPolicy:
    """Decides per chain entry; `discovery` supplies the free list, cached there."""

    def __init__(
        self,
        discovery: FreeModelSource | None,
        seed_model_ids: Collection[str] | None = None,
        *,
        default_model: str = DEFAULT_FREE_MODEL,
        default_provider: str = DEFAULT_FREE_PROVIDER,
        registry: CollectorRegistry | None = None,
        metrics: DowngradeMetrics | None = None,
    ) -> None:
        self.discovery = discovery
        self.seed_model_ids = frozenset(
            seed_cloud_model_ids() if seed_model_ids is None else seed_model_ids
        )
        self.default_model = default_model
        self.default_provider = default_provider
        self.metrics = metrics or DowngradeMetrics(registry)

    async def free_model_ids(self) -> frozenset[str] | None:
        """Ids discovery says are free; None when discovery cannot answer."""
        if self.discovery is None:
            return None
        try:
            listing = await self.discovery.openrouter_free_models()
        except Exception as error:  # OpenRouterUnavailable (503) and anything unexpected
            log.warning("free-tier check without discovery (%s): seed defaults only", error)
            return None
        models = listing.get("models") if isinstance(listing, Mapping) else None
        if not isinstance(models, list):
            return None
        return frozenset(str(m.get("id")) for m in models if isinstance(m, Mapping) and m.get("id"))

    async def whitelist(self) -> list[str]:
        """The cloud models allowed now (the spec's FREE_TIER_MODELS, made dynamic): the seed
        defaults and every model discovery lists as free, sorted."""
        free = await self.free_model_ids()
        return sorted(self.seed_model_ids | (free or frozenset()))

    async def check(self, entry: ChainEntry, *, context: str = "") -> Decision:
        """Allowed or downgraded (and then logged and counted)."""
        free = await self.free_model_ids() if entry.provider in CLOUD_PROVIDERS else frozenset()
        return self.record(self.decide(entry, free), context=context)

    def decide(self, entry: ChainEntry, free_ids: Collection[str] | None) -> Decision:
        """The pure rule (no log, no count): `free_ids` None means discovery is unavailable."""
        if entry.provider not in CLOUD_PROVIDERS:
            return Decision(entry, entry, True, REASON_LOCAL)
        if entry.model_id in self.seed_model_ids:
            return Decision(entry, entry, True, REASON_SEED)
        if free_ids is not None and entry.model_id in free_ids and entry.provider == "openrouter":
            return Decision(entry, entry, True, REASON_FREE)
        reason = REASON_NO_DISCOVERY if free_ids is None else REASON_NOT_FREE
        if entry.provider != "openrouter":
            reason = "groq model: no pricing discovery and not a seed default"
        downgraded = replace(entry, model_id=self.default_model, provider=self.default_provider)
        return Decision(entry, downgraded, False, reason)

    def record(self, decision: Decision, *, context: str = "") -> Decision:
        if decision.downgraded:
            self.metrics.downgrades.labels(
                decision.original.model_id, decision.entry.model_id
            ).inc()
            log.warning(
                "model downgraded from_model=%s from_provider=%s to_model=%s reason=%s%s",
                decision.original.model_id,
                decision.original.provider,
                decision.entry.model_id,
                decision.reason,
                f" context={context}" if context else "",
            )
        return decision


@dataclass(frozen=True, slots=True)
class EnforcedChain:
    """A chain after the policy: what to run, and what was downgraded (for the response)."""

    entries: list[ChainEntry]
    decisions: tuple[Decision, ...]

    @property
    def downgrades(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.downgraded)

    @property
    def downgraded(self) -> bool:
        return bool(self.downgrades)

    def headers(self) -> dict[str, str]:
        return downgrade_headers(self.downgrades)

    def metadata(self) -> dict[str, Any]:
        return downgrade_metadata(self.downgrades)


async def enforce_chain(
    policy: FreeTierPolicy, chain: Sequence[ChainEntry], *, context: str = ""
) -> EnforcedChain:
    """Apply the policy to every entry of a chain (before `Gateway.complete`/`stream`).

    Disabled entries are kept as they are (the gateway drops them). Discovery is asked at most
    once. A downgraded entry whose default model already runs earlier in the chain is dropped,
    so the same model is not called twice.
    """
    needs_discovery = any(e.enabled and e.provider in CLOUD_PROVIDERS for e in chain)
    free = await policy.free_model_ids() if needs_discovery else frozenset()
    entries: list[ChainEntry] = []
    decisions: list[Decision] = []
    seen: set[str] = set()
    for entry in sorted(chain, key=lambda e: e.priority):
        if not entry.enabled:
            entries.append(entry)
            continue
        decision = policy.record(policy.decide(entry, free), context=context)
        decisions.append(decision)
        if decision.entry.key in seen:
            continue
        seen.add(decision.entry.key)
        entries.append(decision.entry)
    return EnforcedChain(entries, tuple(decisions))


def downgrade_headers(downgrades: Iterable[Decision]) -> dict[str, str]:
    """`X-Model-Downgraded: <from> -> <to>[, ...]` when something was downgraded, else {}."""
    pairs = [f"{d.original.model_id} -> {d.entry.model_id}" for d in downgrades if d.downgraded]
    return {DOWNGRADE_HEADER: ", ".join(pairs)} if pairs else {}


def downgrade_metadata(downgrades: Iterable[Decision]) -> dict[str, Any]:
    """Response metadata: `model_downgraded` (bool) and `downgrades` (from/to/reason)."""
    items = [d.to_dict() for d in downgrades if d.downgraded]
    meta: dict[str, Any] = {META_DOWNGRADED: bool(items)}
    if items:
        meta[META_DOWNGRADES] = items
    return meta
