"""What an enrichment run records: the rules the write side applies to the policy's results."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from domain.graph import LineageEdge
from domain.kg.aggregates import REJECTED, EnrichmentRun, ProposedEdge
from domain.kg.proposals import LineageEdgeProposal
from domain.kg.verify import Verification

POLICY_ACTOR = "kg-enrichment"
AUTO_ACTOR = "auto-accept"


@dataclass(frozen=True, slots=True)
class VerifiedProposal:
    """A valid proposal, the LLM edge it stands for, and what the parser says about it."""

    proposal: LineageEdgeProposal
    edge: LineageEdge
    verification: Verification


@dataclass(frozen=True, slots=True)
class FileEnrichment:
    """One file's result: `proposed` (the model answered), `failed_open` (429/503/parse
    failure: nothing proposed, the parser's lineage untouched) or `skipped`."""

    path: str
    content_hash: str
    outcome: str
    model: str | None = None
    provider: str | None = None
    proposals: tuple[VerifiedProposal, ...] = ()
    dropped: Mapping[str, int] = field(default_factory=dict)
    stale_edge_ids: tuple[str, ...] = ()
    error: str | None = None

    def skipped(self, why: str) -> FileEnrichment:
        return replace(self, outcome="skipped", proposals=(), stale_edge_ids=(), error=why)


@dataclass(frozen=True, slots=True)
class EnrichmentRecord:
    """What the policy hands the write side for one run: some of its files, and whether the
    run ends with them. `run_key` names the run (see `EnrichmentRun.create_id`)."""

    tenant_id: str
    project_id: str
    run_key: str
    trigger: str
    files: tuple[FileEnrichment, ...] = ()
    trigger_position: int | None = None
    scope: tuple[str, ...] = ()
    complete: bool = True
    duration_s: float = 0.0
    auto_accept_confidence: float | None = None
    actor: str = POLICY_ACTOR


EdgeLoader = Callable[[str], ProposedEdge | None]


def record_file(
    run: EnrichmentRun,
    result: FileEnrichment,
    load_edge: EdgeLoader,
    *,
    auto_accept_confidence: float | None,
    actor: str,
) -> list[ProposedEdge]:
    """Record one file's proposals on their edges and its outcome on the run.

    An edge already open (proposed or accepted) is not proposed again; one a reviewer rejected
    stays rejected. A verified proposal at or above `auto_accept_confidence` is accepted by
    `auto-accept`. Open proposals for an older version of the file that the model no longer
    makes are retracted."""
    run_id = str(run.id)
    changed: dict[str, ProposedEdge] = {}
    counts: Counter[str] = Counter()
    verifications: Counter[str] = Counter()
    confidences: list[float] = []
    for item in result.proposals:
        edge_id = item.edge.edge_id
        aggregate = load_edge(edge_id) or ProposedEdge(
            run.tenant_id, run.project_id, result.path, edge_id
        )
        if aggregate.active or aggregate.status == REJECTED:
            counts["already_known" if aggregate.active else "previously_rejected"] += 1
            continue
        aggregate.propose(
            item.edge,
            model=result.model or "",
            provider=result.provider or "",
            reasoning=item.proposal.reasoning,
            run_id=run_id,
            content_hash=result.content_hash,
            actor=actor,
        )
        aggregate.verify(item.verification.status, item.verification.detail)
        counts["proposed"] += 1
        verifications[item.verification.status] += 1
        confidences.append(item.edge.confidence)
        if _auto_accepts(item, auto_accept_confidence):
            aggregate.accept(
                AUTO_ACTOR,
                f"verified, confidence {item.edge.confidence:.2f} >= {auto_accept_confidence}",
                auto=True,
            )
            counts["accepted"] += 1
        changed[edge_id] = aggregate
    proposed_now = {item.edge.edge_id for item in result.proposals}
    for edge_id in result.stale_edge_ids:
        stale = changed.get(edge_id) or load_edge(edge_id)
        if edge_id in proposed_now or stale is None or stale.status != "proposed":
            continue
        if stale.content_hash == result.content_hash:
            continue
        stale.retract(actor, "the file changed and the model no longer proposes this edge")
        changed[edge_id] = stale
        counts["retracted"] += 1
    run.file_processed(
        tenant_id=run.tenant_id,
        project_id=run.project_id,
        path=result.path,
        outcome=result.outcome,
        model=result.model,
        provider=result.provider,
        proposed=counts["proposed"],
        accepted=counts["accepted"],
        already_known=counts["already_known"] + counts["previously_rejected"],
        retracted=counts["retracted"],
        dropped=dict(sorted(result.dropped.items())),
        confidences=confidences,
        verifications=dict(sorted(verifications.items())),
        edge_ids=sorted(e for e in changed if e in proposed_now),
        error=result.error,
    )
    return list(changed.values())


def _auto_accepts(item: VerifiedProposal, threshold: float | None) -> bool:
    return (
        threshold is not None
        and item.verification.status == "verified"
        and item.edge.confidence >= threshold
    )
