"""The graph projection: lineage events into the graph store (Ladybug embedded, Neo4j server)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from domain.envelope import EventEnvelope
from domain.graph import LineageEdge, LineageNode
from projections.base import CheckpointedProjection

log = logging.getLogger(__name__)

# LLM-proposed edges (domain.kg.aggregates.ProposedEdge): written with source, model,
# confidence, status and verification; a rejected or retracted one leaves the graph.
LLM_EDGE_UPSERTS = frozenset({"LineageEdgeProposed", "LineageEdgeVerified", "LineageEdgeAccepted"})
LLM_EDGE_REMOVALS = frozenset({"LineageEdgeRejected", "LineageEdgeRetracted"})


class GraphProjection(CheckpointedProjection):
    """Read model `graph`: nodes and edges with evidence, per tenant; checkpoint in the graph.

    Upserts are idempotent (deterministic node and edge keys), so a crash between a write and
    its checkpoint only repeats the write."""

    name = "graph"
    relevant_events = frozenset(
        {"LineageExtracted", "LineageEdgesRetracted", "FileDeleted", *LLM_EDGE_UPSERTS}
        | LLM_EDGE_REMOVALS
    )

    def _apply(self, envelopes: Sequence[EventEnvelope], last: int) -> None:
        for run in _runs(envelopes):
            self._apply_run(run)
        self.store.save_checkpoint(self.name, last)

    def _apply_run(self, run: list[EventEnvelope]) -> None:
        """A run of LineageExtracted events of one tenant is one write: upserts in order, the
        later version of a node or edge winning, as if applied one by one."""
        if len(run) > 1 or run[0].event_type == "LineageExtracted":
            first = run[0].payload
            self.store.apply_file(
                first["tenant_id"],
                first["project_id"],
                first["path"],
                [LineageNode.from_dict(n) for e in run for n in e.payload["nodes"]],
                [LineageEdge.from_dict(x) for e in run for x in e.payload["edges"]],
                [],
            )
            return
        self._apply_one(run[0])

    def _apply_one(self, envelope: EventEnvelope) -> None:
        p = envelope.payload
        if envelope.event_type == "LineageEdgesRetracted":
            self.store.apply_file(p["tenant_id"], p["project_id"], p["path"], [], [], p["edge_ids"])
        elif envelope.event_type == "FileDeleted":
            self.store.remove_file(p["tenant_id"], p["project_id"], p["path"])
        elif envelope.event_type in LLM_EDGE_UPSERTS:  # the event carries the edge as it is now
            edge = LineageEdge.from_dict(p["edge"])
            self.store.apply_file(p["tenant_id"], p["project_id"], p["file_path"], [], [edge], [])
        elif envelope.event_type in LLM_EDGE_REMOVALS:
            self.store.apply_file(
                p["tenant_id"], p["project_id"], p["file_path"], [], [], [p["edge_id"]]
            )


def _runs(envelopes: Sequence[EventEnvelope]) -> list[list[EventEnvelope]]:
    """Group consecutive LineageExtracted events of one tenant; anything else stands alone."""
    runs: list[list[EventEnvelope]] = []
    for envelope in envelopes:
        joinable = (
            envelope.event_type == "LineageExtracted"
            and bool(runs)
            and runs[-1][-1].event_type == "LineageExtracted"
            and runs[-1][-1].payload["tenant_id"] == envelope.payload["tenant_id"]
        )
        if joinable:
            runs[-1].append(envelope)
        else:
            runs.append([envelope])
    return runs
