"""Model configuration commands and their handlers (a mixin for `UpstreamApplication`).

Each handler loads the tenant's `ModelConfigRegistry` (and the configuration it touches),
decides with the domain's rules and saves every changed aggregate in one atomic write. Two
writers racing for one registry conflict in the store; the loser decides again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError
from pydantic import Field

from commands.models import Command, CommandResult
from domain.model_config import (
    ModelConfig,
    ModelConfigNotFound,
    ModelConfigRegistry,
    ModelConfigSpec,
    ModelParameters,
    create_config,
    delete_config,
    seed_configs,
    seed_profile,
    update_config,
)

if TYPE_CHECKING:
    from eventsourcing.application import Application

    _Base = Application[Any]
else:
    _Base = object

log = logging.getLogger(__name__)

_ATTEMPTS = 3


class CreateModelConfig(Command):
    """Configure a model for a usage type at a priority (1 = primary)."""

    tenant_id: str = "default"
    usage_type: str = Field(description="chat_deep, chat_semantic, ..., kg_edge_creation")
    priority: int = Field(description="1 = primary, 2 = secondary, ...")
    model_id: str = Field(description="The provider's model identifier")
    model_name: str | None = Field(default=None, description="Human-readable name")
    provider: str = Field(description="ollama, openrouter, groq, openai_compatible, extractive")
    parameters: dict[str, Any] | None = Field(
        default=None, description="streaming, reasoning_mode, max_tokens, temperature"
    )
    enabled: bool = True
    actor: str = "api"
    reason: str = ""


class UpdateModelConfig(Command):
    """Change some fields of a configuration; `parameters` given are merged over the current."""

    tenant_id: str = "default"
    config_id: str
    usage_type: str | None = None
    priority: int | None = None
    model_id: str | None = None
    model_name: str | None = None
    provider: str | None = None
    parameters: dict[str, Any] | None = None
    enabled: bool | None = None
    actor: str = "api"
    reason: str = ""


class DeleteModelConfig(Command):
    """Delete a configuration; its slot becomes free."""

    tenant_id: str = "default"
    config_id: str
    actor: str = "api"
    reason: str = ""


class SeedModelConfigs(Command):
    """Create a seed profile's configurations; refused when some exist, unless `force`."""

    tenant_id: str = "default"
    profile: str = Field(default="default", description="default | local")
    force: bool = Field(default=False, description="Delete every configuration first")
    ollama_base_url: str | None = Field(
        default=None, description="local profile: Ollama entries come first when given"
    )
    actor: str = "api"
    reason: str = ""


class ModelConfigCommands(_Base):
    """Handlers for the model configuration commands, against `repository` and `save`."""

    def create_model_config(self, cmd: CreateModelConfig) -> CommandResult:
        spec = ModelConfigSpec.validated(
            usage_type=cmd.usage_type,
            priority=cmd.priority,
            model_id=cmd.model_id,
            model_name=cmd.model_name,
            provider=cmd.provider,
            parameters=cmd.parameters,
            enabled=cmd.enabled,
        )

        def decide() -> CommandResult:
            registry = self._registry(cmd.tenant_id)
            config = create_config(registry, spec, cmd.actor, cmd.reason or "created")
            return self._saved_config(str(config.id), registry, config)

        return self._retrying(decide)

    def update_model_config(self, cmd: UpdateModelConfig) -> CommandResult:
        def decide() -> CommandResult:
            registry = self._registry(cmd.tenant_id)
            config = self._config(cmd.tenant_id, cmd.config_id)
            current = config.spec
            new = ModelConfigSpec.validated(
                usage_type=_pick(cmd.usage_type, current.usage_type),
                priority=_pick(cmd.priority, current.priority),
                model_id=_pick(cmd.model_id, current.model_id),
                model_name=_pick(cmd.model_name, current.model_name),
                provider=_pick(cmd.provider, current.provider),
                parameters=ModelParameters.validated(
                    cmd.parameters, ModelParameters.validated(current.parameters)
                ).to_dict(),
                enabled=_pick(cmd.enabled, current.enabled),
            )
            if not update_config(registry, config, new, cmd.actor, cmd.reason or "updated"):
                return self._unchanged(str(config.id))
            return self._saved_config(str(config.id), registry, config)

        return self._retrying(decide)

    def delete_model_config(self, cmd: DeleteModelConfig) -> CommandResult:
        def decide() -> CommandResult:
            registry = self._registry(cmd.tenant_id)
            config = self._config(cmd.tenant_id, cmd.config_id)
            delete_config(registry, config, cmd.actor, cmd.reason or "deleted")
            result = self._saved_config(str(config.id), registry, config)
            return result.model_copy(update={"deleted": (str(config.id),)})

        return self._retrying(decide)

    def seed_model_configs(self, cmd: SeedModelConfigs) -> CommandResult:
        specs = seed_profile(cmd.profile, cmd.ollama_base_url)

        def decide() -> CommandResult:
            registry = self._registry(cmd.tenant_id)
            existing = [self._config(cmd.tenant_id, i) for i in registry.config_ids]
            changed = seed_configs(
                registry,
                existing,
                specs,
                profile=cmd.profile,
                force=cmd.force,
                actor=cmd.actor,
                reason=cmd.reason or f"seed profile {cmd.profile}",
                ollama_base_url=cmd.ollama_base_url,
            )
            recordings = self.save(registry, *changed)
            deleted = tuple(str(c.id) for c in changed if c.deleted)
            return CommandResult(
                accepted=True,
                aggregate_id=str(registry.id),
                position=max(r.notification.id for r in recordings),
                changed=True,
                deleted=deleted,
            )

        return self._retrying(decide)

    # -- helpers ----------------------------------------------------------------------------
    def _retrying(self, decide: Callable[[], CommandResult]) -> CommandResult:
        for attempt in range(_ATTEMPTS):
            try:
                return decide()
            except IntegrityError:  # another writer changed the registry first: decide again
                log.info("concurrent model configuration write, retrying (%d)", attempt + 1)
        return decide()

    def _registry(self, tenant_id: str) -> ModelConfigRegistry:
        registry_id = ModelConfigRegistry.create_id(tenant_id)
        if registry_id in self.repository:
            registry: ModelConfigRegistry = self.repository.get(registry_id)
            return registry
        return ModelConfigRegistry(tenant_id)

    def _config(self, tenant_id: str, config_id: str) -> ModelConfig:
        try:
            aggregate_id = UUID(config_id)
        except ValueError:
            raise ModelConfigNotFound(f"no model configuration with id {config_id!r}") from None
        if aggregate_id in self.repository:
            config: Any = self.repository.get(aggregate_id)
            found = isinstance(config, ModelConfig) and config.tenant_id == tenant_id
            if found and not config.deleted:
                return config  # type: ignore[no-any-return]
        raise ModelConfigNotFound(f"no model configuration with id {config_id!r}")

    def _saved_config(self, config_id: str, *aggregates: Any) -> CommandResult:
        recordings = self.save(*aggregates)
        return CommandResult(
            accepted=True,
            aggregate_id=config_id,
            position=max(r.notification.id for r in recordings),
            changed=True,
        )

    def _unchanged(self, config_id: str) -> CommandResult:
        position = self.recorder.max_notification_id() or 0
        return CommandResult(accepted=True, aggregate_id=config_id, position=position)


def _pick(value: Any, current: Any) -> Any:
    return current if value is None else value
