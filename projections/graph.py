"""The graph projection: lineage events into the graph store (Ladybug embedded, Neo4j server)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from domain.envelope import EventEnvelope
from domain.graph import LineageEdge, LineageNode

log = logging.getLogger(__name__)


class GraphProjection:
    """Read model `graph`: nodes and edges with evidence, per tenant; checkpoint in the graph."""

    name = "graph"

    def __init__(self, store: Any) -> None:
        self.store = store
        self._position: int | None = None

    def start(self) -> None:
        self.store.ensure()

    def position(self) -> int:
        if self._position is None:
            self._position = self.store.checkpoint(self.name)
        return self._position

    def process(self, envelopes: Sequence[EventEnvelope]) -> None:
        fresh = [e for e in envelopes if e.position > self.position()]
        if not fresh:
            return
        for envelope in fresh:
            self._apply(envelope)
        last = fresh[-1].position
        self.store.save_checkpoint(self.name, last)
        self._position = last

    def reset(self) -> None:
        self.store.drop()
        self._position = 0
        self.start()

    def _apply(self, envelope: EventEnvelope) -> None:
        p = envelope.payload
        if envelope.event_type == "LineageExtracted":
            self.store.apply_file(
                p["tenant_id"],
                p["project_id"],
                p["path"],
                [LineageNode.from_dict(n) for n in p["nodes"]],
                [LineageEdge.from_dict(e) for e in p["edges"]],
                [],
            )
        elif envelope.event_type == "LineageEdgesRetracted":
            self.store.apply_file(p["tenant_id"], p["project_id"], p["path"], [], [], p["edge_ids"])
        elif envelope.event_type == "FileDeleted":
            self.store.remove_file(p["tenant_id"], p["project_id"], p["path"])
