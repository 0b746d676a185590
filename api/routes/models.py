"""Model configuration (commands over the bus, reads from the DuckDB read model) and discovery."""

from __future__ import annotations

import asyncio
import functools
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from adapters.model_discovery import DiscoverySettings, ModelDiscovery
from api.deps import Actor, ContainerDep, Wait, send_command, wait_if_asked
from bus.model_config_subjects import (
    CMD_MODEL_CONFIG_CREATE,
    CMD_MODEL_CONFIG_DELETE,
    CMD_MODEL_CONFIG_SEED,
    CMD_MODEL_CONFIG_UPDATE,
)
from commands.model_config import (
    CreateModelConfig,
    DeleteModelConfig,
    SeedModelConfigs,
    UpdateModelConfig,
)
from commands.models import CommandResult
from domain.model_config import (
    ModelConfigNotFound,
    ModelSelectionUnavailable,
    parse_usage_type,
    seed_profile,
)

router = APIRouter(prefix="/api/v1/models", tags=["models"])

UsageFilter = Annotated[str | None, Query(description="chat_deep, ..., kg_edge_creation")]


class ModelConfigIn(BaseModel):
    usage_type: str = Field(description="chat_deep, chat_semantic, ..., kg_edge_creation")
    priority: int = Field(description="1 = primary, 2 = secondary, 3 = tertiary")
    model_id: str = Field(description="The provider's model id, e.g. qwen/qwen3-4b:free")
    model_name: str | None = Field(default=None, description="Human-readable name")
    provider: str = Field(description="ollama, openrouter, groq, openai_compatible, extractive")
    parameters: dict[str, Any] | None = Field(
        default=None, description="streaming, reasoning_mode, max_tokens, temperature"
    )
    enabled: bool = True
    reason: str = Field(default="", description="Why (kept in the audit history)")


class ModelConfigPatch(BaseModel):
    usage_type: str | None = None
    priority: int | None = None
    model_id: str | None = None
    model_name: str | None = None
    provider: str | None = None
    parameters: dict[str, Any] | None = Field(
        default=None, description="Merged over the current parameters"
    )
    enabled: bool | None = None
    reason: str = ""


class SeedRequest(BaseModel):
    force: bool = Field(default=False, description="Delete every configuration first")
    profile: str = Field(default="default", description="default | local")
    reason: str = ""


# -- writes -----------------------------------------------------------------------------------
@router.post("/config", status_code=201)
async def create_config(
    body: ModelConfigIn, container: ContainerDep, wait: Wait = False, actor: Actor = "api"
) -> dict[str, Any]:
    """Configure a model for a usage type and priority (409 when the slot is taken)."""
    command = CreateModelConfig(actor=actor, **body.model_dump())
    result = await send_command(container, CMD_MODEL_CONFIG_CREATE, command)
    return await _written(container, result, wait)


@router.post("/config/seed")
async def seed_configs(
    container: ContainerDep,
    body: Annotated[SeedRequest | None, Body()] = None,
    wait: Wait = False,
    actor: Actor = "api",
) -> dict[str, Any]:
    """Create the default configurations; 409 when some exist, unless `{"force": true}`."""
    request = body or SeedRequest()
    ollama = _discovery(container).settings.ollama_base_url if request.profile == "local" else None
    command = SeedModelConfigs(
        profile=request.profile,
        force=request.force,
        ollama_base_url=ollama,
        actor=actor,
        reason=request.reason,
    )
    result = await send_command(container, CMD_MODEL_CONFIG_SEED, command)
    waited = await wait_if_asked(container, result, wait)
    return {
        "count": len(seed_profile(request.profile, ollama)),
        "profile": request.profile,
        "replaced": len(result.deleted),
        "position": result.position,
        "waited": waited,
    }


@router.put("/config/{config_id}")
@router.patch("/config/{config_id}")
async def update_config(
    config_id: str,
    body: ModelConfigPatch,
    container: ContainerDep,
    wait: Wait = False,
    actor: Actor = "api",
) -> dict[str, Any]:
    """Change fields of a configuration (enable/disable with `enabled`); absent fields stay."""
    fields = body.model_dump(exclude_none=True)
    command = UpdateModelConfig(config_id=config_id, actor=actor, **fields)
    result = await send_command(container, CMD_MODEL_CONFIG_UPDATE, command)
    return await _written(container, result, wait)


@router.delete("/config/{config_id}")
async def delete_config(
    config_id: str,
    container: ContainerDep,
    wait: Wait = False,
    actor: Actor = "api",
    reason: Annotated[str, Query(description="Why (kept in the audit history)")] = "",
) -> dict[str, Any]:
    """Delete a configuration; its (usage_type, priority) slot becomes free."""
    command = DeleteModelConfig(config_id=config_id, actor=actor, reason=reason)
    result = await send_command(container, CMD_MODEL_CONFIG_DELETE, command)
    waited = await wait_if_asked(container, result, wait)
    return {"id": config_id, "deleted": True, "position": result.position, "waited": waited}


# -- reads ------------------------------------------------------------------------------------
@router.get("/config")
async def list_configs(
    container: ContainerDep, usage_type: UsageFilter = None, enabled: bool | None = None
) -> dict[str, Any]:
    """Every configuration, by usage type and priority; filter by usage_type and enabled."""
    configs = await _read(container, "list_configs", usage_type, enabled)
    return {"configs": configs, "count": len(configs)}


@router.get("/config/history")
async def usage_history(container: ContainerDep, usage_type: UsageFilter = None) -> dict[str, Any]:
    """The audit trail of a usage type's configurations (deleted ones included): who, when, why."""
    if usage_type is not None:
        usage_type = parse_usage_type(usage_type).value
    events = await _read(container, "history_for_usage", usage_type)
    return {"usage_type": usage_type, "events": events, "count": len(events)}


@router.get("/config/chain", response_model=None)
async def fallback_chain(
    container: ContainerDep, usage_type: Annotated[str, Query()]
) -> dict[str, Any] | JSONResponse:
    """The fallback chain of a usage type: enabled configurations by priority (503 if none)."""
    try:
        chain = await _read(container, "get_fallback_chain", usage_type)
    except ModelSelectionUnavailable as error:
        return JSONResponse(error.body(), status_code=503)
    return {"usage_type": usage_type, "chain": chain, "count": len(chain)}


@router.get("/config/active", response_model=None)
async def active_model(
    container: ContainerDep, usage_type: Annotated[str, Query()]
) -> dict[str, Any] | JSONResponse:
    """The model a usage type uses now: its first enabled configuration (503 if none)."""
    try:
        active: dict[str, Any] = await _read(container, "get_active_model", usage_type)
    except ModelSelectionUnavailable as error:
        return JSONResponse(error.body(), status_code=503)
    return active


@router.get("/config/{config_id}/history")
async def config_history(config_id: str, container: ContainerDep) -> dict[str, Any]:
    """The audit trail of one configuration, deleted or not: who, when, why, what changed."""
    events = await _read(container, "history", config_id)
    if not events:
        raise _not_found(config_id)
    return {"config_id": config_id, "events": events, "count": len(events)}


@router.get("/config/{config_id}")
async def get_config(config_id: str, container: ContainerDep) -> dict[str, Any]:
    """One configuration (404 when there is none with this id)."""
    config: dict[str, Any] | None = await _read(container, "get", config_id)
    if config is None:
        raise _not_found(config_id)
    return config


# -- discovery --------------------------------------------------------------------------------
@router.get("/openrouter/free")
async def openrouter_free(container: ContainerDep) -> dict[str, Any]:
    """OpenRouter's free models (cached for an hour; `cached: true` when OpenRouter fails)."""
    return await _discovery(container).openrouter_free_models()


@router.get("/ollama")
async def ollama_models(container: ContainerDep) -> dict[str, Any]:
    """The models the local Ollama holds (503 "Ollama is not running" when it cannot answer)."""
    return await _discovery(container).ollama_models()


# -- accounting -------------------------------------------------------------------------------
@router.get("/usage")
async def model_usage(container: ContainerDep) -> dict[str, Any]:
    """Tokens and calls per provider and model since this process started (free providers
    are accounted in tokens, not dollars); the same counters are in /metrics."""
    report: dict[str, Any] = container.gateway.usage_report()
    return report


# -- helpers ----------------------------------------------------------------------------------

async def _written(container: Any, result: CommandResult, wait: bool) -> dict[str, Any]:
    """A write's answer: id, position, whether it changed anything; the configuration as the
    read model holds it when the caller waited for it."""
    waited = await wait_if_asked(container, result, wait)
    config_id = result.aggregate_id or ""
    config = await _read(container, "get", config_id) if waited else None
    return {
        "id": config_id,
        "position": result.position,
        "changed": result.changed,
        "waited": waited,
        "config": config,
    }


async def _read(container: Any, query: str, *args: Any) -> Any:
    return await asyncio.to_thread(getattr(container.model_configs, query), *args)


def _not_found(config_id: str) -> ModelConfigNotFound:
    return ModelConfigNotFound(f"no model configuration with id {config_id!r}")


def _discovery(container: Any) -> ModelDiscovery:
    found = getattr(container, "model_discovery", None)
    return found if isinstance(found, ModelDiscovery) else _process_discovery()


@functools.cache
def _process_discovery() -> ModelDiscovery:
    """One per process (it holds the OpenRouter cache) until the container provides one."""
    return ModelDiscovery(DiscoverySettings())
