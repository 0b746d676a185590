"""Knowledge-graph enrichment commands and their handlers (a mixin for `UpstreamApplication`).

`ProposeKGEdges` asks for a run (the enrichment policy reacts to the event it records);
`AcceptLineageEdge` / `RejectLineageEdge` record a reviewer's decision; the policy hands its
results to `record_kg_enrichment` in-process (it runs beside the write side).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import IntegrityError
from pydantic import Field

from commands.models import Command, CommandResult
from domain.dbt import DbtProject
from domain.dbt_record import DbtProjectRecord, candidate_roots
from domain.ingestion import SourceFile, normalise_path
from domain.kg.aggregates import EnrichmentRun, ProposedEdge, ProposedEdgeNotFound
from domain.kg.code import text_from_chunks
from domain.kg.record import EnrichmentRecord, FileEnrichment, record_file
from domain.urn import validate_project_id

if TYPE_CHECKING:
    from eventsourcing.application import Application

    _Base = Application[Any]
else:
    _Base = object

log = logging.getLogger(__name__)

_ATTEMPTS = 3


class ProposeKGEdges(Command):
    """Ask the KG enrichment policy for LLM-proposed lineage edges of a project's files."""

    tenant_id: str = "default"
    project_id: str = Field(description="The project whose files are enriched")
    scope: tuple[str, ...] = Field(
        default=(), description="File paths or folders (prefixes); empty: every file"
    )
    actor: str = "api"
    reason: str = ""


class AcceptLineageEdge(Command):
    """Accept an LLM-proposed edge: lineage queries follow it by default from then on."""

    tenant_id: str = "default"
    edge_id: str
    actor: str = "api"
    reason: str = ""


class RejectLineageEdge(Command):
    """Reject an LLM-proposed edge: it leaves the graph and is not proposed again."""

    tenant_id: str = "default"
    edge_id: str
    actor: str = "api"
    reason: str = ""


@dataclass(frozen=True, slots=True)
class FileCode:
    """A file's current text (rebuilt from its chunks), dialect, content hash and dbt project:
    what the parser needs to read it again."""

    text: str
    dialect: str | None
    content_hash: str
    dbt: DbtProject | None = None


class KGCommands(_Base):
    """Handlers for the KG enrichment commands, against `repository` and `save`."""

    def propose_kg_edges(self, cmd: ProposeKGEdges) -> CommandResult:
        project_id = validate_project_id(cmd.project_id)
        scope = sorted({normalise_path(s) for s in cmd.scope})
        run = EnrichmentRun(
            tenant_id=cmd.tenant_id,
            run_key=f"request|{uuid.uuid4()}",
            project_id=project_id,
            scope=scope,
            trigger="request",
            trigger_position=None,
            actor=cmd.actor,
            reason=cmd.reason or "requested",
        )
        return self._kg_saved(str(run.id), run)

    def accept_lineage_edge(self, cmd: AcceptLineageEdge) -> CommandResult:
        def decide() -> CommandResult:
            edge = self._proposed_edge(cmd.tenant_id, cmd.edge_id)
            self._file_still_there(edge)
            if not edge.accept(cmd.actor, cmd.reason or "accepted"):
                return self._kg_unchanged(str(edge.id))
            return self._kg_saved(str(edge.id), edge)

        return self._kg_retrying(decide)

    def reject_lineage_edge(self, cmd: RejectLineageEdge) -> CommandResult:
        def decide() -> CommandResult:
            edge = self._proposed_edge(cmd.tenant_id, cmd.edge_id)
            if not edge.reject(cmd.actor, cmd.reason or "rejected"):
                return self._kg_unchanged(str(edge.id))
            return self._kg_saved(str(edge.id), edge)

        return self._kg_retrying(decide)

    def record_kg_enrichment(self, record: EnrichmentRecord) -> CommandResult:
        """Record a run's file results (and its totals when `record.complete`), atomically.

        Idempotent: files the run already processed are not recorded again, and a completed
        run records nothing. A file whose content changed (or that was deleted) since the
        model read it is recorded as skipped, without proposals."""

        def decide() -> CommandResult:
            run_id = EnrichmentRun.create_id(record.tenant_id, record.run_key)
            run: EnrichmentRun | None = self._kg_get(run_id)
            if run is None:
                run = EnrichmentRun(
                    tenant_id=record.tenant_id,
                    run_key=record.run_key,
                    project_id=record.project_id,
                    scope=list(record.scope),
                    trigger=record.trigger,
                    trigger_position=record.trigger_position,
                    actor=record.actor,
                    reason="a file was ingested",
                )
            if run.completed:
                return self._kg_unchanged(str(run_id))
            changed: dict[Any, Any] = {}
            for result in record.files:
                if run.processed(result.path):
                    continue
                result = self._still_current(record, result)
                edges = record_file(
                    run,
                    result,
                    lambda edge_id: (
                        changed.get(ProposedEdge.create_id(record.tenant_id, edge_id))
                        or self._kg_get(ProposedEdge.create_id(record.tenant_id, edge_id))
                    ),
                    auto_accept_confidence=record.auto_accept_confidence,
                    actor=record.actor,
                )
                changed.update((e.id, e) for e in edges)
            if record.complete:
                run.complete(record.duration_s)
            return self._kg_saved(str(run_id), *changed.values(), run)

        return self._kg_retrying(decide)

    # -- what the policy reads from the write side --------------------------------------
    def kg_run(self, tenant_id: str, run_key_or_id: str) -> EnrichmentRun | None:
        """A run by its id (a request's) or by its key (an ingested file's)."""
        try:
            run_id = uuid.UUID(run_key_or_id)
        except ValueError:
            run_id = EnrichmentRun.create_id(tenant_id, run_key_or_id)
        found = self._kg_get(run_id)
        return found if isinstance(found, EnrichmentRun) else None

    def kg_file_code(self, tenant_id: str, project_id: str, path: str) -> FileCode | None:
        """The file's current text rebuilt from its last recorded chunks; None when the file
        is unknown or deleted."""
        aggregate_id = SourceFile.create_id(tenant_id, project_id, path)
        source_file: SourceFile | None = self._kg_get(aggregate_id)
        if source_file is None or not source_file.present:
            return None
        chunks: list[dict[str, Any]] | None = None
        dialect: str | None = None
        for domain_event in self.events.get(aggregate_id, desc=True):
            name = type(domain_event).__name__
            if name == "LineageExtracted" and dialect is None:
                dialect = getattr(domain_event, "dialect", None)
            if name == "FileChunked":
                chunks = list(getattr(domain_event, "chunks", []))
                break
        if chunks is None:
            return None
        return FileCode(
            text_from_chunks(chunks),
            dialect,
            source_file.content_hash,
            self._kg_dbt_project(tenant_id, project_id, path),
        )

    def _kg_dbt_project(self, tenant_id: str, project_id: str, path: str) -> DbtProject | None:
        for root in candidate_roots(path):
            record = self._kg_get(DbtProjectRecord.create_id(tenant_id, project_id, root))
            if isinstance(record, DbtProjectRecord):
                return record.project()
        return None

    # -- helpers ------------------------------------------------------------------------
    def _still_current(self, record: EnrichmentRecord, result: FileEnrichment) -> FileEnrichment:
        if result.outcome != "proposed":
            return result
        source_file: SourceFile | None = self._kg_get(
            SourceFile.create_id(record.tenant_id, record.project_id, result.path)
        )
        if source_file is None or not source_file.present:
            return result.skipped("the file was deleted while the model read it")
        if source_file.content_hash != result.content_hash:
            return result.skipped("the file changed while the model read it")
        return result

    def _proposed_edge(self, tenant_id: str, edge_id: str) -> ProposedEdge:
        edge = self._kg_get(ProposedEdge.create_id(tenant_id, edge_id.strip()))
        if not isinstance(edge, ProposedEdge):
            raise ProposedEdgeNotFound(f"no LLM-proposed edge with id {edge_id!r}")
        return edge

    def _file_still_there(self, edge: ProposedEdge) -> None:
        from domain.kg.aggregates import EdgeNotReviewable

        source_file: SourceFile | None = self._kg_get(
            SourceFile.create_id(edge.tenant_id, edge.project_id, edge.file_path)
        )
        if source_file is None or not source_file.present:
            raise EdgeNotReviewable(
                f"cannot accept edge {edge.edge_id}: its file {edge.file_path} was deleted"
            )

    def _kg_get(self, aggregate_id: Any) -> Any:
        if aggregate_id not in self.repository:
            return None
        return self.repository.get(aggregate_id)

    def _kg_retrying(self, decide: Callable[[], CommandResult]) -> CommandResult:
        for attempt in range(_ATTEMPTS):
            try:
                return decide()
            except IntegrityError:  # another writer changed the edge or run first
                log.info("concurrent KG write, retrying (%d)", attempt + 1)
        return decide()

    def _kg_saved(self, aggregate_id: str, *aggregates: Any) -> CommandResult:
        recordings = self.save(*aggregates)
        return CommandResult(
            accepted=True,
            aggregate_id=aggregate_id,
            position=max(r.notification.id for r in recordings),
            changed=True,
        )

    def _kg_unchanged(self, aggregate_id: str) -> CommandResult:
        position = self.recorder.max_notification_id() or 0
        return CommandResult(accepted=True, aggregate_id=aggregate_id, position=position)
