"""Model configurations: which model answers each usage type, in which order, with which parameters.

Two aggregates record the facts:

- `ModelConfig`: one configuration (a usage type's slot `priority`, the model, its provider and
  parameters, enabled or not). Events: `ModelConfigCreated`, `ModelConfigUpdated` (one event for
  every change, enabling and disabling included: its `changes` say what moved from what to what),
  `ModelConfigDeleted`.
- `ModelConfigRegistry`: one per tenant (id = uuid5 of the tenant). It owns the set of
  (usage_type, priority) slots, so UNIQUE(usage_type, priority) is a write-side rule: a command
  that would take a taken slot is refused with `PrioritySlotTaken` (HTTP 409) before anything is
  recorded, and the registry's version makes two concurrent claims of one slot conflict in the
  store. It also records `ModelConfigsSeeded(profile, count)` and `ModelConfigsReset`.

Every event carries `actor` (who) and `reason` (why) for the audit trail; the store adds when.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.errors import (
    InvalidCommand,
    ServiceUnavailable,
    UpstreamError,
    _register,
)

_NAMESPACE = UUID("3c9a4f0e-7b21-4d6a-9e58-2f1b0c7d8e94")


class UsageType(StrEnum):
    """What a model is used for; chat usage types are derived from the chat endpoint."""

    CHAT_DEEP = "chat_deep"
    CHAT_SEMANTIC = "chat_semantic"
    CHAT_TEXT = "chat_text"
    CHAT_GRAPH = "chat_graph"
    CHAT_TITLE = "chat_title"
    EMBEDDING = "embedding"
    INFERENCE = "inference"
    KG_EDGE_CREATION = "kg_edge_creation"


CHAT_USAGE_TYPES: tuple[UsageType, ...] = (
    UsageType.CHAT_DEEP,
    UsageType.CHAT_SEMANTIC,
    UsageType.CHAT_TEXT,
    UsageType.CHAT_GRAPH,
    UsageType.CHAT_TITLE,
)


def usage_type_for_chat(intent: str) -> UsageType:
    """The usage type of a chat endpoint: `/api/chat/deep` -> `chat_deep`, etc."""
    return parse_usage_type(f"chat_{intent.strip().lower()}")


class Provider(StrEnum):
    """Which API is called for a configuration's model."""

    OLLAMA = "ollama"
    OPENROUTER = "openrouter"
    GROQ = "groq"
    OPENAI_COMPATIBLE = "openai_compatible"
    EXTRACTIVE = "extractive"  # no model: a deterministic digest of the evidence


# -- errors ---------------------------------------------------------------------------------
class UnknownUsageType(InvalidCommand):
    code = "unknown_usage_type"
    hint = "Use one of: " + ", ".join(u.value for u in UsageType) + "."


class UnknownProvider(InvalidCommand):
    code = "unknown_provider"
    hint = "Use one of: " + ", ".join(p.value for p in Provider) + "."


class InvalidModelParameters(InvalidCommand):
    code = "invalid_model_parameters"
    hint = (
        "parameters may hold streaming (bool), reasoning_mode (bool), max_tokens (integer > 0) "
        "and temperature (0.0-2.0); every field is optional."
    )


class InvalidModelConfig(InvalidCommand):
    code = "invalid_model_config"
    hint = "Give a model_id, a model_name and a priority of 1 or more."


class UnknownSeedProfile(InvalidCommand):
    code = "unknown_seed_profile"
    hint = "Use profile 'default' (free OpenRouter models) or 'local' (Ollama, then extractive)."


class ModelConfigNotFound(UpstreamError):
    """No configuration has this id (or it was deleted). HTTP 404."""

    code = "model_config_not_found"
    hint = "List the configurations with GET /api/v1/models/config."


class PrioritySlotTaken(UpstreamError):
    """Another configuration holds this (usage_type, priority). HTTP 409."""

    code = "model_config_slot_taken"
    hint = "Choose a free priority, or move or delete the configuration that holds it."


SEED_CONFLICT_MESSAGE = "Configurations already exist. Use reset endpoint to replace."


class ModelConfigsAlreadyExist(UpstreamError):
    """Seeding a non-empty set of configurations without force. HTTP 409."""

    code = "model_configs_exist"
    hint = 'Send {"force": true} to POST /api/v1/models/config/seed to replace them.'


class ModelSelectionUnavailable(ServiceUnavailable):
    """No enabled model for a usage type: the service answers 503 and never falls back to
    a hard-coded model. `body()` is the spec's response body."""

    code = "model_selection_unavailable"
    error_text: ClassVar[str] = "No models configured"
    action_text: ClassVar[str] = "Configure models via frontend"

    def __init__(self, message: str, *, hint: str | None = None, usage_type: str = "") -> None:
        super().__init__(message, hint=hint)
        self.usage_type = usage_type or _usage_type_from(message)

    def body(self) -> dict[str, str]:
        return {
            "error": self.error_text,
            "usage_type": self.usage_type,
            "action": self.action_text,
            "code": self.code,
            "message": self.message,
            "hint": self.detail_hint,
        }


class NoModelsConfigured(ModelSelectionUnavailable):
    code = "no_models_configured"
    hint = "Create a configuration with POST /api/v1/models/config, or seed the defaults."


class AllModelsDisabled(ModelSelectionUnavailable):
    code = "all_models_disabled"
    error_text = "All models disabled"
    action_text = "Enable at least one model via frontend"
    hint = "Enable a configuration with PATCH /api/v1/models/config/{id} {'enabled': true}."


_NOT_CONFIGURED_MESSAGES: dict[str, str] = {
    UsageType.EMBEDDING.value: "Embedding model not configured",
    UsageType.KG_EDGE_CREATION.value: "KG edge creation model not configured",
}


def not_configured(usage_type: str) -> NoModelsConfigured:
    message = _NOT_CONFIGURED_MESSAGES.get(
        usage_type, f"No models configured for usage type {usage_type}"
    )
    return NoModelsConfigured(message, usage_type=usage_type)


def all_disabled(usage_type: str) -> AllModelsDisabled:
    return AllModelsDisabled(
        f"All models disabled for usage type {usage_type}", usage_type=usage_type
    )


def _usage_type_from(message: str) -> str:
    """Errors crossing the bus keep only code/message/hint: recover the usage type."""
    for usage in UsageType:
        if message.endswith(usage.value):
            return usage.value
    for name, text in _NOT_CONFIGURED_MESSAGES.items():
        if message == text:
            return name
    return ""


_register(
    UnknownUsageType,
    UnknownProvider,
    InvalidModelParameters,
    InvalidModelConfig,
    UnknownSeedProfile,
    ModelConfigNotFound,
    PrioritySlotTaken,
    ModelConfigsAlreadyExist,
    NoModelsConfigured,
    AllModelsDisabled,
)


# -- values ---------------------------------------------------------------------------------
def parse_usage_type(value: str) -> UsageType:
    try:
        return UsageType(value)
    except ValueError:
        valid = ", ".join(u.value for u in UsageType)
        raise UnknownUsageType(
            f"unknown usage_type {value!r}; valid usage types: {valid}"
        ) from None


def parse_provider(value: str) -> Provider:
    try:
        return Provider(value)
    except ValueError:
        valid = ", ".join(p.value for p in Provider)
        raise UnknownProvider(f"unknown provider {value!r}; valid providers: {valid}") from None


@dataclass(frozen=True, slots=True)
class ModelParameters:
    """What is applied to a request; every field optional with the spec's defaults."""

    streaming: bool = True
    reasoning_mode: bool = False
    max_tokens: int = 4096
    temperature: float = 0.3

    FIELDS: ClassVar[tuple[str, ...]] = ("streaming", "reasoning_mode", "max_tokens", "temperature")

    @classmethod
    def validated(
        cls, raw: Mapping[str, Any] | None, base: ModelParameters | None = None
    ) -> ModelParameters:
        """Parameters from a request; fields not given keep `base`'s (or the defaults)."""
        start = (base or cls()).to_dict()
        given = dict(raw or {})
        unknown = sorted(set(given) - set(cls.FIELDS))
        if unknown:
            raise InvalidModelParameters(
                f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(cls.FIELDS)}"
            )
        merged = {**start, **{k: v for k, v in given.items() if v is not None}}
        for name in ("streaming", "reasoning_mode"):
            if not isinstance(merged[name], bool):
                raise InvalidModelParameters(f"parameters.{name} must be true or false")
        max_tokens = merged["max_tokens"]
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise InvalidModelParameters(
                f"parameters.max_tokens must be an integer of 1 or more, not {max_tokens!r}"
            )
        temperature = merged["temperature"]
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            raise InvalidModelParameters(
                f"parameters.temperature must be a number, not {temperature!r}"
            )
        if not math.isfinite(temperature) or not 0.0 <= temperature <= 2.0:
            raise InvalidModelParameters(
                f"parameters.temperature must be between 0.0 and 2.0, not {temperature}"
            )
        return cls(
            streaming=merged["streaming"],
            reasoning_mode=merged["reasoning_mode"],
            max_tokens=max_tokens,
            temperature=float(temperature),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "streaming": self.streaming,
            "reasoning_mode": self.reasoning_mode,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }


@dataclass(frozen=True, slots=True)
class ModelConfigSpec:
    """A validated configuration, as recorded (enum values as plain strings)."""

    usage_type: str
    priority: int
    model_id: str
    model_name: str
    provider: str
    parameters: dict[str, Any] = field(default_factory=lambda: ModelParameters().to_dict())
    enabled: bool = True

    @classmethod
    def validated(
        cls,
        *,
        usage_type: str,
        priority: int,
        model_id: str,
        model_name: str | None,
        provider: str,
        parameters: Mapping[str, Any] | None = None,
        enabled: bool = True,
    ) -> ModelConfigSpec:
        usage = parse_usage_type(usage_type)
        kind = parse_provider(provider)
        if isinstance(priority, bool) or not isinstance(priority, int) or priority < 1:
            raise InvalidModelConfig(f"priority must be an integer of 1 or more, not {priority!r}")
        clean_id = (model_id or "").strip()
        if not clean_id:
            raise InvalidModelConfig("model_id is empty")
        name = (model_name or "").strip() or clean_id
        return cls(
            usage_type=usage.value,
            priority=priority,
            model_id=clean_id,
            model_name=name,
            provider=kind.value,
            parameters=ModelParameters.validated(parameters).to_dict(),
            enabled=bool(enabled),
        )

    @property
    def slot(self) -> str:
        return slot_key(self.usage_type, self.priority)

    def to_dict(self) -> dict[str, Any]:
        return {
            "usage_type": self.usage_type,
            "priority": self.priority,
            "model_id": self.model_id,
            "model_name": self.model_name,
            "provider": self.provider,
            "parameters": dict(self.parameters),
            "enabled": self.enabled,
        }


def slot_key(usage_type: str, priority: int) -> str:
    return f"{usage_type}#{priority}"


# -- aggregates -----------------------------------------------------------------------------
class ModelConfig(Aggregate):
    """One model configuration of a tenant; its id is random (uuid4)."""

    @event("ModelConfigCreated")
    def __init__(
        self,
        tenant_id: str,
        usage_type: str,
        priority: int,
        model_id: str,
        model_name: str,
        provider: str,
        parameters: dict[str, Any],
        enabled: bool,
        actor: str,
        reason: str,
    ) -> None:
        self.tenant_id = tenant_id
        self.usage_type = usage_type
        self.priority = priority
        self.model_id = model_id
        self.model_name = model_name
        self.provider = provider
        self.parameters = dict(parameters)
        self.enabled = enabled
        self.deleted = False

    @classmethod
    def create(cls, tenant_id: str, spec: ModelConfigSpec, actor: str, reason: str) -> ModelConfig:
        return cls(
            tenant_id=tenant_id,
            usage_type=spec.usage_type,
            priority=spec.priority,
            model_id=spec.model_id,
            model_name=spec.model_name,
            provider=spec.provider,
            parameters=dict(spec.parameters),
            enabled=spec.enabled,
            actor=actor,
            reason=reason,
        )

    @event("ModelConfigUpdated")
    def _record_update(
        self,
        tenant_id: str,
        usage_type: str,
        priority: int,
        model_id: str,
        model_name: str,
        provider: str,
        parameters: dict[str, Any],
        enabled: bool,
        changes: dict[str, Any],
        actor: str,
        reason: str,
    ) -> None:
        self.usage_type = usage_type
        self.priority = priority
        self.model_id = model_id
        self.model_name = model_name
        self.provider = provider
        self.parameters = dict(parameters)
        self.enabled = enabled

    @event("ModelConfigDeleted")
    def _record_delete(
        self, tenant_id: str, usage_type: str, priority: int, actor: str, reason: str
    ) -> None:
        self.deleted = True

    @property
    def spec(self) -> ModelConfigSpec:
        return ModelConfigSpec(
            usage_type=self.usage_type,
            priority=self.priority,
            model_id=self.model_id,
            model_name=self.model_name,
            provider=self.provider,
            parameters=dict(self.parameters),
            enabled=self.enabled,
        )

    def change_to(self, new: ModelConfigSpec, actor: str, reason: str) -> bool:
        """Record the update when something changed; the event carries the whole new state
        and `changes` = {field: [before, after]}. Enabling/disabling is an update too."""
        before = self.spec.to_dict()
        after = new.to_dict()
        changes = {k: [before[k], after[k]] for k in after if before[k] != after[k]}
        if not changes:
            return False
        self._record_update(
            tenant_id=self.tenant_id, changes=changes, actor=actor, reason=reason, **after
        )
        return True

    def delete(self, actor: str, reason: str) -> None:
        self._record_delete(self.tenant_id, self.usage_type, self.priority, actor, reason)


class ModelConfigRegistry(Aggregate):
    """A tenant's configurations and the (usage_type, priority) slot each one holds."""

    @staticmethod
    def create_id(tenant_id: str) -> UUID:
        return uuid5(_NAMESPACE, f"model-config-registry/{tenant_id}")

    @event("ModelConfigRegistryOpened")
    def __init__(self, tenant_id: str) -> None:
        self.tenant_id = tenant_id
        self.slots: dict[str, str] = {}  # slot key -> config id

    @property
    def count(self) -> int:
        return len(self.slots)

    @property
    def config_ids(self) -> list[str]:
        return sorted(self.slots.values())

    def holder_of(self, usage_type: str, priority: int) -> str | None:
        return self.slots.get(slot_key(usage_type, priority))

    def check_free(self, spec: ModelConfigSpec, config_id: str | None = None) -> None:
        holder = self.slots.get(spec.slot)
        if holder is not None and holder != config_id:
            raise PrioritySlotTaken(
                f"usage_type {spec.usage_type} already has a configuration at priority "
                f"{spec.priority} (id {holder})"
            )

    @event("ModelConfigSlotClaimed")
    def claim(self, config_id: str, usage_type: str, priority: int) -> None:
        self.slots[slot_key(usage_type, priority)] = config_id

    @event("ModelConfigSlotReleased")
    def release(self, config_id: str, usage_type: str, priority: int) -> None:
        self.slots.pop(slot_key(usage_type, priority), None)

    @event("ModelConfigsReset")
    def record_reset(self, count: int, config_ids: list[str], actor: str, reason: str) -> None:
        self.slots = {}

    @event("ModelConfigsSeeded")
    def record_seed(
        self,
        profile: str,
        count: int,
        config_ids: list[str],
        ollama_base_url: str | None,
        actor: str,
        reason: str,
    ) -> None:
        pass


# -- decisions ------------------------------------------------------------------------------
def create_config(
    registry: ModelConfigRegistry, spec: ModelConfigSpec, actor: str, reason: str
) -> ModelConfig:
    registry.check_free(spec)
    config = ModelConfig.create(registry.tenant_id, spec, actor, reason)
    registry.claim(str(config.id), spec.usage_type, spec.priority)
    return config


def update_config(
    registry: ModelConfigRegistry,
    config: ModelConfig,
    new: ModelConfigSpec,
    actor: str,
    reason: str,
) -> bool:
    registry.check_free(new, str(config.id))
    old_slot = (config.usage_type, config.priority)
    if not config.change_to(new, actor, reason):
        return False
    if old_slot != (new.usage_type, new.priority):
        registry.release(str(config.id), *old_slot)
        registry.claim(str(config.id), new.usage_type, new.priority)
    return True


def delete_config(
    registry: ModelConfigRegistry, config: ModelConfig, actor: str, reason: str
) -> None:
    config.delete(actor, reason)
    registry.release(str(config.id), config.usage_type, config.priority)


def seed_configs(
    registry: ModelConfigRegistry,
    existing: Sequence[ModelConfig],
    specs: Sequence[ModelConfigSpec],
    *,
    profile: str,
    force: bool,
    actor: str,
    reason: str,
    ollama_base_url: str | None = None,
) -> list[ModelConfig]:
    """Seed a profile: refused when configurations exist, unless `force` (reset: each one is
    deleted, then the profile's are created). Returns the deleted and the created aggregates,
    deletions first, in the order they must be saved."""
    if registry.count and not force:
        raise ModelConfigsAlreadyExist(SEED_CONFLICT_MESSAGE)
    deleted: list[ModelConfig] = []
    if registry.count:
        ids = registry.config_ids
        registry.record_reset(len(ids), ids, actor, reason or "reset to the seed defaults")
        for config in existing:
            config.delete(actor, f"reset to the {profile} seed profile")
            deleted.append(config)
    created = []
    for spec in specs:
        config = ModelConfig.create(registry.tenant_id, spec, actor, f"seed profile {profile}")
        registry.claim(str(config.id), spec.usage_type, spec.priority)
        created.append(config)
    registry.record_seed(
        profile, len(created), [str(c.id) for c in created], ollama_base_url, actor, reason
    )
    return [*deleted, *created]


# -- seed profiles --------------------------------------------------------------------------
_NAMES: dict[str, str] = {
    "deepseek/deepseek-r1-0528:free": "DeepSeek R1 0528 (free)",
    "mistralai/devstral-2512:free": "Mistral Devstral 2512 (free)",
    "google/gemini-2.0-flash-exp:free": "Google Gemini 2.0 Flash Experimental (free)",
    "qwen/qwen3-4b:free": "Qwen3 4B (free)",
    "mistralai/mistral-7b-instruct:free": "Mistral 7B Instruct (free)",
    "nomic-embed-text": "Nomic Embed Text",
    "llama3.1:8b": "Llama 3.1 8B",
    "extractive": "Extractive evidence digest (no model)",
}

_OR = Provider.OPENROUTER.value
_OLLAMA = Provider.OLLAMA.value

# The spec's seed list, verbatim: (usage_type, [(model_id, provider, temperature or None)]).
DEFAULT_SEED: tuple[tuple[UsageType, tuple[tuple[str, str, float | None], ...]], ...] = (
    (
        UsageType.CHAT_DEEP,
        (
            ("deepseek/deepseek-r1-0528:free", _OR, 0.6),
            ("mistralai/devstral-2512:free", _OR, None),
            ("google/gemini-2.0-flash-exp:free", _OR, None),
        ),
    ),
    (
        UsageType.CHAT_SEMANTIC,
        (
            ("google/gemini-2.0-flash-exp:free", _OR, 0.2),
            ("qwen/qwen3-4b:free", _OR, None),
            ("mistralai/mistral-7b-instruct:free", _OR, None),
        ),
    ),
    (
        UsageType.CHAT_TEXT,
        (
            ("google/gemini-2.0-flash-exp:free", _OR, 0.3),
            ("mistralai/mistral-7b-instruct:free", _OR, None),
            ("qwen/qwen3-4b:free", _OR, None),
        ),
    ),
    (
        UsageType.CHAT_GRAPH,
        (
            ("mistralai/devstral-2512:free", _OR, 0.1),
            ("deepseek/deepseek-r1-0528:free", _OR, None),
            ("google/gemini-2.0-flash-exp:free", _OR, None),
        ),
    ),
    (
        UsageType.CHAT_TITLE,
        (
            ("google/gemini-2.0-flash-exp:free", _OR, 0.2),
            ("mistralai/mistral-7b-instruct:free", _OR, None),
            ("qwen/qwen3-4b:free", _OR, None),
        ),
    ),
    (UsageType.EMBEDDING, (("nomic-embed-text", _OLLAMA, None),)),
    (UsageType.INFERENCE, (("llama3.1:8b", _OLLAMA, None),)),
    (
        UsageType.KG_EDGE_CREATION,
        (
            ("mistralai/devstral-2512:free", _OR, None),
            ("google/gemini-2.0-flash-exp:free", _OR, None),
        ),
    ),
)

LOCAL_CHAT_MODEL = "llama3.1:8b"
LOCAL_EMBEDDING_MODEL = "nomic-embed-text"
SEED_PROFILES: tuple[str, ...] = ("default", "local")


def _spec(
    usage: UsageType, priority: int, model_id: str, provider: str, temp: float | None
) -> ModelConfigSpec:
    parameters = {} if temp is None else {"temperature": temp}
    return ModelConfigSpec.validated(
        usage_type=usage.value,
        priority=priority,
        model_id=model_id,
        model_name=_NAMES.get(model_id, model_id),
        provider=provider,
        parameters=parameters,
    )


def seed_profile(profile: str, ollama_base_url: str | None = None) -> list[ModelConfigSpec]:
    """The configurations a seed profile creates.

    `default`: the spec's list verbatim (free OpenRouter models; Ollama for embedding and
    inference). `local`: answers without any cloud model. When an Ollama base URL is given,
    Ollama entries come first (llama3.1:8b for chat, inference and KG edges,
    nomic-embed-text for embeddings); `extractive` is last for every chat usage type."""
    if profile == "default":
        return [
            _spec(usage, priority, model_id, provider, temp)
            for usage, entries in DEFAULT_SEED
            for priority, (model_id, provider, temp) in enumerate(entries, start=1)
        ]
    if profile != "local":
        raise UnknownSeedProfile(
            f"unknown seed profile {profile!r}; valid profiles: {', '.join(SEED_PROFILES)}"
        )
    specs: list[ModelConfigSpec] = []
    for usage in UsageType:
        entries: list[tuple[str, str]] = []
        if ollama_base_url:
            model = LOCAL_EMBEDDING_MODEL if usage is UsageType.EMBEDDING else LOCAL_CHAT_MODEL
            entries.append((model, _OLLAMA))
        if usage in CHAT_USAGE_TYPES:
            entries.append(("extractive", Provider.EXTRACTIVE.value))
        specs.extend(
            _spec(usage, priority, model_id, provider, None)
            for priority, (model_id, provider) in enumerate(entries, start=1)
        )
    return specs


def specs_by_usage(specs: Iterable[ModelConfigSpec]) -> dict[str, list[ModelConfigSpec]]:
    grouped: dict[str, list[ModelConfigSpec]] = {}
    for spec in specs:
        grouped.setdefault(spec.usage_type, []).append(spec)
    return grouped
