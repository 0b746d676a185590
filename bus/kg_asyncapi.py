"""The KG enrichment part of the bus contract: its commands and typed event payloads."""

from __future__ import annotations

from faststream.nats import NatsBroker
from pydantic import BaseModel, Field

from bus.asyncapi import EdgePayload, envelope_schema


class LineageEdgeRegisteredPayload(BaseModel):
    tenant_id: str
    project_id: str
    file_path: str
    edge_id: str = Field(description="The LLM edge's id (never a parser edge's)")


class LineageEdgeProposedPayload(BaseModel):
    tenant_id: str
    project_id: str
    file_path: str = Field(description="The file whose code the model read")
    edge: EdgePayload = Field(description="The edge as it stands (provenance llm)")
    source: str = Field(description='Always "llm"')
    model: str
    provider: str
    confidence: float = Field(ge=0.0, le=1.0)
    reasoning: str
    status: str = Field(description='Always "proposed"')
    run_id: str
    content_hash: str = Field(description="The version of the file the model read")
    actor: str


class LineageEdgeVerifiedPayload(BaseModel):
    tenant_id: str
    project_id: str
    file_path: str
    edge: EdgePayload
    verification: str = Field(description="verified | contradicted | unverified")
    detail: str = Field(description="What the parser found in the cited code")
    actor: str


class LineageEdgeAcceptedPayload(BaseModel):
    tenant_id: str
    project_id: str
    file_path: str
    edge: EdgePayload
    actor: str = Field(description="The reviewer, or auto-accept (KG_AUTO_ACCEPT_CONFIDENCE)")
    reason: str
    auto: bool


class LineageEdgeDecisionPayload(BaseModel):
    tenant_id: str
    project_id: str
    file_path: str
    edge_id: str
    actor: str
    reason: str


class KGEnrichmentRequestedPayload(BaseModel):
    tenant_id: str
    run_key: str = Field(description="ingest|<project>|<path>|<position>, or request|<uuid>")
    project_id: str
    scope: list[str] = Field(description="Paths or folders; empty: every SQL/Python file")
    trigger: str = Field(description="ingest (a LineageExtracted) | request (ProposeKGEdges)")
    trigger_position: int | None
    actor: str
    reason: str


class KGEnrichmentFileProcessedPayload(BaseModel):
    tenant_id: str
    project_id: str
    path: str
    outcome: str = Field(description="proposed | failed_open (429/503/parse failure) | skipped")
    model: str | None
    provider: str | None
    proposed: int
    accepted: int
    already_known: int
    retracted: int
    dropped: dict[str, int] = Field(description="Invalid proposals dropped, by reason")
    confidences: list[float]
    verifications: dict[str, int]
    edge_ids: list[str]
    error: str | None


class ConfidenceSummaryPayload(BaseModel):
    min: float | None
    median: float | None
    max: float | None


class KGEnrichmentCompletedPayload(BaseModel):
    tenant_id: str
    project_id: str
    outcome: str = Field(description="completed | failed_open | skipped")
    files: int
    failed: int
    proposed: int
    accepted: int
    dropped: int
    retracted: int
    models: list[str]
    confidence: ConfidenceSummaryPayload
    error: str | None
    duration_s: float


KG_EVENT_SCHEMAS: dict[str, tuple[type[BaseModel], str]] = {
    "events.proposed_edge.LineageEdgeRegistered": (
        LineageEdgeRegisteredPayload,
        "An LLM edge was seen for the first time.",
    ),
    "events.proposed_edge.LineageEdgeProposed": (
        LineageEdgeProposedPayload,
        "A model proposed a lineage edge (source llm, model, confidence, reasoning).",
    ),
    "events.proposed_edge.LineageEdgeVerified": (
        LineageEdgeVerifiedPayload,
        "The parser re-read the cited code: verified, contradicted or unverified.",
    ),
    "events.proposed_edge.LineageEdgeAccepted": (
        LineageEdgeAcceptedPayload,
        "A reviewer (or auto-accept) accepted the edge: lineage queries follow it.",
    ),
    "events.proposed_edge.LineageEdgeRejected": (
        LineageEdgeDecisionPayload,
        "A reviewer rejected the edge: it leaves the graph.",
    ),
    "events.proposed_edge.LineageEdgeRetracted": (
        LineageEdgeDecisionPayload,
        "The proposal was withdrawn (its file changed and the model no longer proposes it).",
    ),
    "events.enrichment_run.KGEnrichmentRequested": (
        KGEnrichmentRequestedPayload,
        "An enrichment run was asked for (an ingested file, or ProposeKGEdges).",
    ),
    "events.enrichment_run.KGEnrichmentFileProcessed": (
        KGEnrichmentFileProcessedPayload,
        "One file of a run: its outcome, counts, model and confidences.",
    ),
    "events.enrichment_run.KGEnrichmentCompleted": (
        KGEnrichmentCompletedPayload,
        "A run's totals: proposed and accepted counts, models, confidence min/median/max.",
    ),
}


def document_kg(broker: NatsBroker) -> None:
    """Add the KG commands (typed) and events to a documentation broker."""
    from bus.asyncapi import _documented_receiver
    from bus.kg_subjects import CMD_KG_ACCEPT_EDGE, CMD_KG_PROPOSE_EDGES, CMD_KG_REJECT_EDGE
    from commands.kg import AcceptLineageEdge, ProposeKGEdges, RejectLineageEdge

    commands: list[tuple[str, type[BaseModel]]] = [
        (CMD_KG_PROPOSE_EDGES, ProposeKGEdges),
        (CMD_KG_ACCEPT_EDGE, AcceptLineageEdge),
        (CMD_KG_REJECT_EDGE, RejectLineageEdge),
    ]
    for subject, model in commands:
        broker.subscriber(
            subject,
            title=subject,
            description=f"{model.__name__} (request-reply; the reply is a CommandResult).",
        )(_documented_receiver(model))
    for subject, (payload, description) in KG_EVENT_SCHEMAS.items():
        broker.publisher(
            subject,
            title=subject,
            description=description + " Stream EVENTS; Nats-Msg-Id = <app>:<position>.",
            schema=envelope_schema(subject.rsplit(".", 1)[-1] + "Event", payload),
        )
