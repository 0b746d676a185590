"""Aggregates of the knowledge-graph enrichment: each LLM edge, and each enrichment run.

`ProposedEdge` (one per tenant and LLM edge id) records an edge's life: proposed by a model
(source="llm", model, confidence, reasoning, status=proposed), verified against the parser,
accepted or rejected by a reviewer (or auto-accepted), retracted. Every event carries the edge
as it stands after it, so the graph projection only upserts or deletes.

`EnrichmentRun` records one run of the enrichment policy: what asked for it (an ingested file,
or `ProposeKGEdges`), each file's outcome, and the totals (proposed and accepted counts, the
models used, the confidence summary).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.errors import UpstreamError, _register
from domain.graph import LineageEdge
from domain.kg.proposals import ConfidenceSummary

_NAMESPACE = UUID("2b7e4c1a-5d3f-4e8b-9a6c-1f0e2d3c4b5a")

PROPOSED = "proposed"
ACCEPTED = "accepted"
REJECTED = "rejected"
RETRACTED = "retracted"
EDGE_STATUSES = (PROPOSED, ACCEPTED, REJECTED, RETRACTED)


class ProposedEdgeNotFound(UpstreamError):
    code = "proposed_edge_not_found"
    hint = "List the proposals with `upstream kg list` (GET /api/v1/kg/edges)."


class EdgeNotReviewable(UpstreamError):
    """The edge cannot take this decision (it was retracted, or its file is gone)."""

    code = "edge_not_reviewable"
    hint = "Propose edges for the file again (`upstream kg propose`), then review the new ones."


_register(ProposedEdgeNotFound, EdgeNotReviewable)  # rebuilt by code when they cross the bus


class ProposedEdge(Aggregate):
    """An LLM-proposed lineage edge and the decisions about it."""

    @staticmethod
    def create_id(tenant_id: str, edge_id: str) -> UUID:
        return uuid5(_NAMESPACE, f"edge|{tenant_id}|{edge_id}")

    @event("LineageEdgeRegistered")
    def __init__(self, tenant_id: str, project_id: str, file_path: str, edge_id: str) -> None:
        self.tenant_id = tenant_id
        self.project_id = project_id
        self.file_path = file_path
        self.edge_id = edge_id
        self.status = "new"
        self.edge: dict[str, Any] = {}
        self.verification: str | None = None
        self.content_hash = ""
        self.decided_by: str | None = None

    @property
    def active(self) -> bool:
        return self.status in (PROPOSED, ACCEPTED)

    # -- decisions ----------------------------------------------------------------------
    def propose(
        self,
        edge: LineageEdge,
        *,
        model: str,
        provider: str,
        reasoning: str,
        run_id: str,
        content_hash: str,
        actor: str,
    ) -> None:
        """Record the proposal (only a new or retracted edge can be proposed)."""
        if self.status not in ("new", RETRACTED):
            raise EdgeNotReviewable(f"edge {self.edge_id} is already {self.status}")
        properties = {
            "source": "llm",
            "status": PROPOSED,
            "verification": None,
            "model": model,
            "reasoning": reasoning,
            "run_id": run_id,
        }
        data = LineageEdge.from_dict({**edge.to_dict(), "properties": properties}).to_dict()
        self._proposed(
            tenant_id=self.tenant_id,
            project_id=self.project_id,
            file_path=self.file_path,
            edge=data,
            source="llm",
            model=model,
            provider=provider,
            confidence=edge.confidence,
            reasoning=reasoning,
            status=PROPOSED,
            run_id=run_id,
            content_hash=content_hash,
            actor=actor,
        )

    def verify(self, verification: str, detail: str) -> None:
        """Record what the parser says about the proposal (after `propose`)."""
        self._verified(
            tenant_id=self.tenant_id,
            project_id=self.project_id,
            file_path=self.file_path,
            edge=self._edge_with(verification=verification),
            verification=verification,
            detail=detail,
            actor="parser",
        )

    def accept(self, actor: str, reason: str, auto: bool = False) -> bool:
        """Accept (from proposed or rejected); False when it already is."""
        if self.status == ACCEPTED:
            return False
        self._reviewable("accept")
        self._accepted(
            tenant_id=self.tenant_id,
            project_id=self.project_id,
            file_path=self.file_path,
            edge=self._edge_with(status=ACCEPTED),
            actor=actor,
            reason=reason,
            auto=auto,
        )
        return True

    def reject(self, actor: str, reason: str) -> bool:
        """Reject (from proposed or accepted); False when it already is."""
        if self.status == REJECTED:
            return False
        self._reviewable("reject")
        self._rejected(
            tenant_id=self.tenant_id,
            project_id=self.project_id,
            file_path=self.file_path,
            edge_id=self.edge_id,
            actor=actor,
            reason=reason,
        )
        return True

    def retract(self, actor: str, reason: str) -> bool:
        """Withdraw an open proposal (proposed or accepted); False when there is none."""
        if not self.active:
            return False
        self._retracted(
            tenant_id=self.tenant_id,
            project_id=self.project_id,
            file_path=self.file_path,
            edge_id=self.edge_id,
            actor=actor,
            reason=reason,
        )
        return True

    def _reviewable(self, decision: str) -> None:
        if self.status in ("new", RETRACTED):
            raise EdgeNotReviewable(f"cannot {decision} edge {self.edge_id}: it is {self.status}")

    def _edge_with(self, **properties: Any) -> dict[str, Any]:
        return {**self.edge, "properties": {**self.edge.get("properties", {}), **properties}}

    # -- events -------------------------------------------------------------------------
    @event("LineageEdgeProposed")
    def _proposed(
        self,
        tenant_id: str,
        project_id: str,
        file_path: str,
        edge: dict[str, Any],
        source: str,
        model: str,
        provider: str,
        confidence: float,
        reasoning: str,
        status: str,
        run_id: str,
        content_hash: str,
        actor: str,
    ) -> None:
        self.status = status
        self.edge = edge
        self.verification = None
        self.content_hash = content_hash
        self.decided_by = None

    @event("LineageEdgeVerified")
    def _verified(
        self,
        tenant_id: str,
        project_id: str,
        file_path: str,
        edge: dict[str, Any],
        verification: str,
        detail: str,
        actor: str,
    ) -> None:
        self.edge = edge
        self.verification = verification

    @event("LineageEdgeAccepted")
    def _accepted(
        self,
        tenant_id: str,
        project_id: str,
        file_path: str,
        edge: dict[str, Any],
        actor: str,
        reason: str,
        auto: bool,
    ) -> None:
        self.edge = edge
        self.status = ACCEPTED
        self.decided_by = actor

    @event("LineageEdgeRejected")
    def _rejected(
        self,
        tenant_id: str,
        project_id: str,
        file_path: str,
        edge_id: str,
        actor: str,
        reason: str,
    ) -> None:
        self.edge = self._edge_with(status=REJECTED)
        self.status = REJECTED
        self.decided_by = actor

    @event("LineageEdgeRetracted")
    def _retracted(
        self,
        tenant_id: str,
        project_id: str,
        file_path: str,
        edge_id: str,
        actor: str,
        reason: str,
    ) -> None:
        self.edge = self._edge_with(status=RETRACTED)
        self.status = RETRACTED


class EnrichmentRun(Aggregate):
    """One enrichment run: its trigger, each file's outcome, and its totals."""

    @staticmethod
    def create_id(tenant_id: str, run_key: str) -> UUID:
        return uuid5(_NAMESPACE, f"run|{tenant_id}|{run_key}")

    @staticmethod
    def ingest_key(project_id: str, path: str, position: int) -> str:
        """The run an ingested file's LineageExtracted (at `position`) triggers: one per event,
        so a redelivered or replayed event never runs twice."""
        return f"ingest|{project_id}|{path}|{position}"

    @event("KGEnrichmentRequested")
    def __init__(
        self,
        tenant_id: str,
        run_key: str,
        project_id: str,
        scope: list[str],
        trigger: str,
        trigger_position: int | None,
        actor: str,
        reason: str,
    ) -> None:
        self.tenant_id = tenant_id
        self.run_key = run_key
        self.project_id = project_id
        self.scope = list(scope)
        self.trigger = trigger
        self.files: dict[str, dict[str, Any]] = {}
        self.completed = False

    def processed(self, path: str) -> bool:
        return path in self.files

    @event("KGEnrichmentFileProcessed")
    def file_processed(
        self,
        tenant_id: str,
        project_id: str,
        path: str,
        outcome: str,
        model: str | None,
        provider: str | None,
        proposed: int,
        accepted: int,
        already_known: int,
        retracted: int,
        dropped: dict[str, int],
        confidences: list[float],
        verifications: dict[str, int],
        edge_ids: list[str],
        error: str | None,
    ) -> None:
        self.files[path] = {
            "outcome": outcome,
            "model": model,
            "proposed": proposed,
            "accepted": accepted,
            "dropped": sum(dropped.values()),
            "retracted": retracted,
            "confidences": list(confidences),
            "error": error,
        }

    def totals(self) -> dict[str, Any]:
        """The run so far: outcome, counts, models and the confidence summary."""
        files = list(self.files.values())
        answered = [f for f in files if f["outcome"] == "proposed"]
        failed = [f for f in files if f["outcome"] == "failed_open"]
        outcome = "completed" if answered else "failed_open" if failed else "skipped"
        errors = [f["error"] for f in files if f["error"]]
        confidences = [c for f in files for c in f["confidences"]]
        return {
            "outcome": outcome,
            "files": len(files),
            "failed": len(failed),
            "proposed": sum(f["proposed"] for f in files),
            "accepted": sum(f["accepted"] for f in files),
            "dropped": sum(f["dropped"] for f in files),
            "retracted": sum(f["retracted"] for f in files),
            "models": sorted({f["model"] for f in files if f["model"]}),
            "confidence": ConfidenceSummary.of(confidences).to_dict(),
            "error": errors[0] if errors else None,
        }

    def complete(self, duration_s: float) -> None:
        """Record the totals of every file processed."""
        self._completed(
            tenant_id=self.tenant_id,
            project_id=self.project_id,
            **self.totals(),
            duration_s=round(duration_s, 3),
        )

    @event("KGEnrichmentCompleted")
    def _completed(
        self,
        tenant_id: str,
        project_id: str,
        outcome: str,
        files: int,
        failed: int,
        proposed: int,
        accepted: int,
        dropped: int,
        retracted: int,
        models: list[str],
        confidence: dict[str, float | None],
        error: str | None,
        duration_s: float,
    ) -> None:
        self.completed = True
