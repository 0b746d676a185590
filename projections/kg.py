"""The `kg` read model: every lineage edge's history, the LLM edges awaiting review, the
enrichment runs, and the files the enrichment policy may read.

- Parser edges: `parsed` when a `LineageExtracted` carries them, `retracted` when the file no
  longer supports them (`LineageEdgesRetracted`) or is deleted (`FileDeleted`, which also
  retracts the file's LLM edges: the graph drops them with the file).
- LLM edges (`ProposedEdge` events): `proposed`, `verified`, `accepted`, `rejected`,
  `retracted`, with the model, confidence, reasoning, verification and who decided.
- Runs (`EnrichmentRun` events): requested, each file's outcome, the totals.

Each event becomes rows (history with time and actor) written with the checkpoint in one
transaction, so the audit routes need no access to the event store and a rebuild from the
events gives the same read model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from domain.envelope import EventEnvelope
from domain.kg.ports import KGOperation, KGStore
from projections.base import CheckpointedProjection

EDGE_EVENTS = {
    "LineageEdgeProposed": "proposed",
    "LineageEdgeVerified": "verified",
    "LineageEdgeAccepted": "accepted",
    "LineageEdgeRejected": "rejected",
    "LineageEdgeRetracted": "retracted",
}
RUN_EVENTS = ("KGEnrichmentRequested", "KGEnrichmentFileProcessed", "KGEnrichmentCompleted")
FILE_EVENTS = ("LineageExtracted", "LineageEdgesRetracted", "FileDeleted")


class KGProjection(CheckpointedProjection):
    """Read model `kg`: edge history, LLM edges, runs and files; checkpoint in the same store."""

    name = "kg"
    relevant_events = frozenset({*EDGE_EVENTS, *RUN_EVENTS, *FILE_EVENTS})

    def __init__(self, store: KGStore) -> None:
        super().__init__(store)

    def _apply(self, envelopes: Sequence[EventEnvelope], last: int) -> None:
        operations: list[KGOperation] = []
        for envelope in envelopes:
            operations.extend(_OPERATIONS[envelope.event_type](envelope))
        self.store.apply(operations, self.name, last)


def _base(envelope: EventEnvelope) -> dict[str, Any]:
    p = envelope.payload
    return {
        "position": envelope.position,
        "occurred_at": envelope.timestamp,
        "tenant_id": p["tenant_id"],
        "project_id": p["project_id"],
    }


def _lineage_extracted(envelope: EventEnvelope) -> list[KGOperation]:
    p = envelope.payload
    file_row = {**_base(envelope), "path": p["path"], "present": True}
    return [("file", file_row), ("parsed", {**_base(envelope), "edges": p["edges"]})]


def _edges_retracted(envelope: EventEnvelope) -> list[KGOperation]:
    p = envelope.payload
    data = {**_base(envelope), "path": p["path"], "edge_ids": p["edge_ids"]}
    return [("retract_edges", {**data, "reason": p["reason"], "actor": "parser"})]


def _file_deleted(envelope: EventEnvelope) -> list[KGOperation]:
    p = envelope.payload
    data = {**_base(envelope), "path": p["path"], "reason": f"file deleted: {p['reason']}"}
    return [
        ("file", {**_base(envelope), "path": p["path"], "present": False}),
        ("retract_file", {**data, "actor": "system"}),
    ]


def _edge_event(envelope: EventEnvelope) -> list[KGOperation]:
    p = envelope.payload
    edge = p.get("edge") or {}
    details = {
        k: v
        for k, v in p.items()
        if k not in ("tenant_id", "project_id", "file_path", "edge", "edge_id", "actor")
    }
    return [
        (
            "llm_edge",
            {
                **_base(envelope),
                "file_path": p["file_path"],
                "edge_id": p.get("edge_id") or edge.get("edge_id"),
                "edge": edge,
                "action": EDGE_EVENTS[envelope.event_type],
                "event_type": envelope.event_type,
                "actor": p.get("actor", ""),
                "details": details,
            },
        )
    ]


def _run_event(envelope: EventEnvelope) -> list[KGOperation]:
    kind = {
        "KGEnrichmentRequested": "run_requested",
        "KGEnrichmentFileProcessed": "run_file",
        "KGEnrichmentCompleted": "run_completed",
    }[envelope.event_type]
    data = {**_base(envelope), "run_id": envelope.aggregate_id, "payload": envelope.payload}
    return [(kind, data)]


_OPERATIONS: dict[str, Callable[[EventEnvelope], list[KGOperation]]] = {
    "LineageExtracted": _lineage_extracted,
    "LineageEdgesRetracted": _edges_retracted,
    "FileDeleted": _file_deleted,
    **{name: _edge_event for name in EDGE_EVENTS},
    **{name: _run_event for name in RUN_EVENTS},
}
