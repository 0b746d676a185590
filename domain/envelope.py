"""The shape in which a stored event travels on the bus and reaches projections."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def snake_case(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


@dataclass(frozen=True, slots=True)
class EventEnvelope:
    """One recorded event with its position in the store's total order.

    `position` is the event store's notification id: gap-free in SQLite, increasing with
    possible gaps in PostgreSQL. Projections apply envelopes in position order.
    """

    position: int
    app: str
    aggregate: str
    aggregate_id: str
    aggregate_version: int
    event_type: str
    timestamp: str
    payload: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @property
    def subject(self) -> str:
        return f"events.{self.aggregate}.{self.event_type}"

    @property
    def msg_id(self) -> str:
        return f"{self.app}:{self.position}"

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "schema_version": self.schema_version,
                "position": self.position,
                "app": self.app,
                "aggregate": self.aggregate,
                "aggregate_id": self.aggregate_id,
                "aggregate_version": self.aggregate_version,
                "event_type": self.event_type,
                "timestamp": self.timestamp,
                "payload": self.payload,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> EventEnvelope:
        raw = json.loads(data)
        return cls(
            position=int(raw["position"]),
            app=str(raw["app"]),
            aggregate=str(raw["aggregate"]),
            aggregate_id=str(raw["aggregate_id"]),
            aggregate_version=int(raw["aggregate_version"]),
            event_type=str(raw["event_type"]),
            timestamp=str(raw["timestamp"]),
            payload=dict(raw["payload"]),
            schema_version=int(raw.get("schema_version", SCHEMA_VERSION)),
        )
