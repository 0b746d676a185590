"""The model_configs projection: configuration events into the DuckDB read model.

The spec's `model_configs` table has no tenant column, so one read model holds one tenant's
configurations (`tenant_id`, "default" unless told); events of other tenants are skipped (their
position is still checkpointed). Each configuration event also becomes one row of
`model_config_history` (who, when, why, what changed), which the audit routes read: the history
is rebuilt from the events with the view, and needs no access to the event store.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from domain.envelope import EventEnvelope
from domain.model_config import ModelConfigRegistry
from projections.base import CheckpointedProjection

log = logging.getLogger(__name__)

Operation = tuple[str, dict[str, Any]]

CONFIG_EVENTS = ("ModelConfigCreated", "ModelConfigUpdated", "ModelConfigDeleted")
REGISTRY_EVENTS = ("ModelConfigsSeeded", "ModelConfigsReset")
_STATE_FIELDS = (
    "usage_type",
    "priority",
    "model_id",
    "model_name",
    "provider",
    "parameters",
    "enabled",
)


class ModelConfigStore(Protocol):
    """What the projection needs from its store (`adapters.duckdb_model_configs`)."""

    def ensure(self) -> None: ...

    def drop(self) -> None: ...

    def checkpoint(self, name: str) -> int: ...

    def apply(self, operations: Sequence[Operation], name: str, position: int) -> None: ...


class ModelConfigsProjection(CheckpointedProjection):
    """Read model `model_configs`: rows, history and checkpoint written in one transaction."""

    name = "model_configs"
    relevant_events = frozenset(CONFIG_EVENTS + REGISTRY_EVENTS)

    def __init__(self, store: ModelConfigStore, tenant_id: str = "default") -> None:
        super().__init__(store)
        self.tenant_id = tenant_id
        self._registry_id = str(ModelConfigRegistry.create_id(tenant_id))

    def _apply(self, envelopes: Sequence[EventEnvelope], last: int) -> None:
        operations = [op for e in envelopes for op in self._operations(e)]
        self.store.apply(operations, self.name, last)  # rows, history and checkpoint together

    def _operations(self, envelope: EventEnvelope) -> list[Operation]:
        p = envelope.payload
        at = _timestamp(envelope.timestamp)
        if envelope.event_type in CONFIG_EVENTS:
            if p.get("tenant_id") != self.tenant_id:
                return []
            return _config_operations(envelope, at)
        if envelope.event_type in REGISTRY_EVENTS and envelope.aggregate_id == self._registry_id:
            state = {k: v for k, v in p.items() if k not in ("actor", "reason")}
            return [("history", _history(envelope, at, None, None, None, state))]
        return []


def _config_operations(envelope: EventEnvelope, at: datetime) -> list[Operation]:
    p = envelope.payload
    config_id = envelope.aggregate_id
    kind = envelope.event_type
    if kind == "ModelConfigDeleted":
        return [
            ("delete", {"id": config_id}),
            ("history", _history(envelope, at, config_id, p["usage_type"], None, None)),
        ]
    row = {"id": config_id, "at": at, **{k: p[k] for k in _STATE_FIELDS}}
    state = {k: p[k] for k in _STATE_FIELDS}
    if kind == "ModelConfigCreated":
        return [
            ("insert", row),
            ("history", _history(envelope, at, config_id, p["usage_type"], None, state)),
        ]
    changes: dict[str, Any] = p.get("changes") or {}
    previous = changes["usage_type"][0] if "usage_type" in changes else None
    entry = _history(envelope, at, config_id, p["usage_type"], previous, state)
    entry["changes"] = changes
    return [("update", row), ("history", entry)]


def _history(
    envelope: EventEnvelope,
    at: datetime,
    config_id: str | None,
    usage_type: str | None,
    previous_usage_type: str | None,
    state: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "position": envelope.position,
        "config_id": config_id,
        "usage_type": usage_type,
        "previous_usage_type": previous_usage_type,
        "event_type": envelope.event_type,
        "actor": envelope.payload.get("actor"),
        "reason": envelope.payload.get("reason"),
        "at": at,
        "changes": None,
        "state": state,
    }


def _timestamp(value: str) -> datetime:
    """The event's time as naive UTC (DuckDB TIMESTAMP): a rebuild gives the same values."""
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment
