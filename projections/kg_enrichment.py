"""The KG enrichment policy: LLM-proposed lineage edges for ingested files.

It reacts to `LineageExtracted` of SQL and Python files (one run per event) and to
`KGEnrichmentRequested` (`ProposeKGEdges`: a project's files, or some of them). For each file
it rebuilds the code from the recorded chunks, parses it again, gathers the file's neighbours
in the graph, and asks the `kg_edge_creation` chain (model-config.md CFG-12.1) for
`LineageEdgeProposal`s in strict JSON. Invalid proposals are dropped and counted; the others
are resolved to graph URNs, verified against the parser, and recorded through the write side
(`record_kg_enrichment`) with the run's totals.

Failing open: a 429, a 503, a timeout or an answer that is not the JSON asked for gives an
empty list for that file, logged and recorded as `failed_open`; the parser's lineage is never
touched and ingestion never waits for a model. A circuit breaker stops calling the models
after `breaker_failures` files failed in a row, for `breaker_cooldown_s` (doubling while the
provider keeps failing).

It is a policy, not a read model: it acts only on live events (its JetStream consumer starts
at the stream's end and resumes where it left off), never during catch-up or `upstream
replay`, and it records what it processed (one `EnrichmentRun` per `LineageExtracted`
position, with the files a request's run has done), so a redelivered event calls no model.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from domain.envelope import EventEnvelope
from domain.errors import UpstreamError
from domain.file_lineage import extract_file_lineage
from domain.graph import DATASET_KINDS, FileLineage, LineageNode, NodeKind
from domain.kg.aggregates import EnrichmentRun
from domain.kg.prompt import DEFAULT_MAX_CODE_CHARS, proposal_request
from domain.kg.proposals import DEFAULT_MAX_PROPOSALS, ConfidenceSummary, check_proposals
from domain.kg.record import EnrichmentRecord, FileEnrichment, VerifiedProposal
from domain.kg.resolve import resolve_proposals
from domain.kg.verify import verify
from domain.llm import ChainEntry

log = logging.getLogger("upstream.kg")

USAGE_TYPE = "kg_edge_creation"
ENDPOINT = "kg_edge_creation"
ENRICHABLE_SUFFIXES: tuple[str, ...] = (".sql", ".py")
_NEIGHBOUR_KINDS = DATASET_KINDS | {NodeKind.PYTHON_FUNCTION, NodeKind.PROCEDURE}


class CompletionGateway(Protocol):
    """What the policy needs of `queries.gateway.Gateway`."""

    async def complete(
        self, usage_type: str, chain: Sequence[ChainEntry], request: Any, endpoint: str
    ) -> Any: ...


@dataclass(frozen=True, slots=True)
class EnrichmentOptions:
    """`KG_*` settings (adapters.kg_settings) as the policy uses them."""

    on_ingest: bool = True
    auto_accept_confidence: float | None = None
    max_code_chars: int = DEFAULT_MAX_CODE_CHARS
    max_proposals: int = DEFAULT_MAX_PROPOSALS
    breaker_failures: int = 3
    breaker_cooldown_s: float = 60.0
    breaker_max_cooldown_s: float = 600.0
    read_model_wait_s: float = 30.0


class EnrichmentBreaker:
    """Opens after `failures` failed files in a row; half-opens after the cooldown (one call
    is let through: success closes it, failure opens it again for twice as long)."""

    def __init__(
        self, failures: int, cooldown_s: float, max_cooldown_s: float, clock: Callable[[], float]
    ) -> None:
        self.failures_to_open = max(1, failures)
        self.base_cooldown_s = cooldown_s
        self.max_cooldown_s = max_cooldown_s
        self.clock = clock
        self.failures = 0
        self.cooldown_s = cooldown_s
        self.open_until: float | None = None

    def allow(self) -> bool:
        return self.open_until is None or self.clock() >= self.open_until

    def seconds_left(self) -> float:
        return 0.0 if self.open_until is None else max(0.0, self.open_until - self.clock())

    def success(self) -> None:
        self.failures = 0
        self.open_until = None
        self.cooldown_s = self.base_cooldown_s

    def failure(self) -> None:
        half_open = self.open_until is not None
        self.failures += 1
        if half_open:
            self.cooldown_s = min(self.max_cooldown_s, self.cooldown_s * 2)
        if half_open or self.failures >= self.failures_to_open:
            self.open_until = self.clock() + self.cooldown_s
            log.warning(
                "KG enrichment circuit open for %.0f s after %d failed calls",
                self.cooldown_s,
                self.failures,
            )


@dataclass(frozen=True, slots=True)
class _Job:
    tenant_id: str
    project_id: str
    position: int
    path: str | None = None  # an ingested file
    run_id: str | None = None  # a request


class KGEnrichmentPolicy:
    """Reacts to live events: proposes, verifies and records LLM lineage edges."""

    name = "kg_enrichment"

    def __init__(
        self,
        app: Any,
        gateway: CompletionGateway,
        chain_rows: Callable[[], Sequence[Mapping[str, Any]]],
        graph: Any,
        kg_store: Any,
        *,
        options: EnrichmentOptions | None = None,
        free_tier: Any = None,
        kg_position: Callable[[], int] | None = None,
        wake: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.gateway = gateway
        self.chain_rows = chain_rows
        self.graph = graph
        self.kg_store = kg_store
        self.options = options or EnrichmentOptions()
        self.free_tier = free_tier
        self.kg_position = kg_position
        self.wake = wake or (lambda: None)
        self.breaker = EnrichmentBreaker(
            self.options.breaker_failures,
            self.options.breaker_cooldown_s,
            self.options.breaker_max_cooldown_s,
            clock,
        )
        self.runs = 0
        self._said: set[str] = set()

    # -- events -------------------------------------------------------------------------
    async def handle(self, envelopes: Sequence[EventEnvelope]) -> None:
        """Run every job the envelopes ask for, in order (an ingested file's last version)."""
        for job in self.jobs(envelopes):
            if job.path is not None:
                await self.enrich_ingested(job)
            else:
                await self.enrich_requested(job)

    def jobs(self, envelopes: Sequence[EventEnvelope]) -> list[_Job]:
        latest: dict[tuple[str, str, str], _Job] = {}
        requests: list[_Job] = []
        for e in envelopes:
            p = e.payload
            if e.event_type == "LineageExtracted" and self.options.on_ingest:
                if enrichable(p["path"]):
                    key = (p["tenant_id"], p["project_id"], p["path"])
                    latest.pop(key, None)  # the newer version replaces it, in stream order
                    latest[key] = _Job(p["tenant_id"], p["project_id"], e.position, p["path"])
            elif e.event_type == "KGEnrichmentRequested" and p.get("trigger") == "request":
                requests.append(
                    _Job(p["tenant_id"], p["project_id"], e.position, run_id=e.aggregate_id)
                )
        return sorted([*latest.values(), *requests], key=lambda j: j.position)

    async def enrich_ingested(self, job: _Job) -> None:
        """One run for one ingested file, unless that event's run was recorded already."""
        assert job.path is not None
        key = EnrichmentRun.ingest_key(job.project_id, job.path, job.position)
        if await asyncio.to_thread(self.app.kg_run, job.tenant_id, key) is not None:
            return  # a redelivery: recorded before, no model is called again
        chain = await self.chain(quiet=True)
        if not chain:
            return
        began = time.perf_counter()
        result = await self.enrich_file(job.tenant_id, job.project_id, job.path, chain)
        record = EnrichmentRecord(
            tenant_id=job.tenant_id,
            project_id=job.project_id,
            run_key=key,
            trigger="ingest",
            trigger_position=job.position,
            scope=(job.path,),
            files=(result,),
            duration_s=time.perf_counter() - began,
            auto_accept_confidence=self.options.auto_accept_confidence,
        )
        await self.record(record)

    async def enrich_requested(self, job: _Job) -> None:
        """A `ProposeKGEdges` run: every file in scope not done yet, one record per file."""
        assert job.run_id is not None
        run = await asyncio.to_thread(self.app.kg_run, job.tenant_id, job.run_id)
        if run is None or run.completed:
            return
        await self._wait_for_kg(job.position)
        began = time.perf_counter()
        chain = await self.chain(quiet=False)
        files = await asyncio.to_thread(self.kg_store.files, job.tenant_id, job.project_id)
        todo = [
            f["path"]
            for f in files
            if enrichable(f["path"])
            and in_scope(f["path"], run.scope)
            and not run.processed(f["path"])
        ]
        base = EnrichmentRecord(
            tenant_id=job.tenant_id,
            project_id=job.project_id,
            run_key=run.run_key,
            trigger="request",
            complete=False,
            auto_accept_confidence=self.options.auto_accept_confidence,
        )
        for path in todo:
            if chain:
                result = await self.enrich_file(job.tenant_id, job.project_id, path, chain)
            else:
                result = FileEnrichment(path, "", "skipped", error=not_configured_text())
            await self.record(replace(base, files=(result,)), log_run=False)
        duration = time.perf_counter() - began
        await self.record(replace(base, complete=True, duration_s=duration))

    # -- one file -----------------------------------------------------------------------
    async def enrich_file(
        self, tenant_id: str, project_id: str, path: str, chain: Sequence[ChainEntry]
    ) -> FileEnrichment:
        """Ask the chain for one file's proposals; fail open on any model failure."""
        code = await asyncio.to_thread(self.app.kg_file_code, tenant_id, project_id, path)
        if code is None:
            return FileEnrichment(path, "", "skipped", error="the file was deleted")
        lineage = await asyncio.to_thread(_parse, path, code, project_id)
        neighbours = await asyncio.to_thread(self._neighbours, tenant_id, lineage)
        stale = await asyncio.to_thread(self._open_proposals, tenant_id, project_id, path)
        failed = FileEnrichment(path, code.content_hash, "failed_open", stale_edge_ids=())
        if not self.breaker.allow():
            why = f"circuit open: the models kept failing ({self.breaker.seconds_left():.0f}s left)"
            return replace(failed, error=why)
        request = proposal_request(
            path,
            code.text,
            lineage,
            neighbours,
            max_code_chars=self.options.max_code_chars,
            max_proposals=self.options.max_proposals,
        )
        try:
            answer = await self.gateway.complete(USAGE_TYPE, chain, request, ENDPOINT)
        except UpstreamError as error:  # AllModelsFailed, a provider error, no configuration
            self.breaker.failure()
            log.warning("KG enrichment of %s failed open (no proposals): %s", path, error.message)
            return replace(failed, error=error.message)
        self.breaker.success()
        checked = check_proposals(answer.data, self.options.max_proposals)
        names = sorted({n for p in checked.valid for n in (p.source_node, p.target_node)})
        known = [
            *lineage.nodes,
            *neighbours,
            *await asyncio.to_thread(self._named, tenant_id, project_id, names),
        ]
        resolution = resolve_proposals(
            checked.valid, project_id=project_id, path=path, code=code.text, known=known
        )
        proposals = tuple(
            VerifiedProposal(r.proposal, r.edge, verify(r.edge, lineage))
            for r in resolution.resolved
        )
        dropped = dict(checked.dropped)
        for reason, count in (resolution.dropped or {}).items():
            dropped[reason] = dropped.get(reason, 0) + count
        if dropped:
            log.info("KG enrichment of %s dropped invalid proposals: %s", path, dropped)
        return FileEnrichment(
            path=path,
            content_hash=code.content_hash,
            outcome="proposed",
            model=answer.model_used,
            provider=answer.provider,
            proposals=proposals,
            dropped=dropped,
            stale_edge_ids=tuple(stale),
        )

    async def chain(self, *, quiet: bool) -> list[ChainEntry]:
        """The usable `kg_edge_creation` chain: enabled entries by priority, without the
        offline `extractive` provider (it has nothing to propose), free-tier enforced."""
        try:
            rows = await asyncio.to_thread(self.chain_rows)
        except Exception as error:  # the read model is not there yet: nothing to run
            log.warning("KG enrichment cannot read its model configuration: %s", error)
            return []
        entries = [ChainEntry.from_row(r) for r in rows]
        usable = [e for e in entries if e.enabled and e.provider != "extractive"]
        if len(usable) < len([e for e in entries if e.enabled]):
            self._once(
                "extractive",
                "KG enrichment skips the extractive provider (it proposes "
                "no edges); configure a model for kg_edge_creation to enrich the graph",
            )
        if not usable:
            self._once(
                "off",
                f"KG enrichment is off: {not_configured_text()} "
                "(POST /api/v1/models/config with usage_type kg_edge_creation)",
            )
            return []
        if self.free_tier is not None:
            from queries.free_tier import enforce_chain

            usable = (await enforce_chain(self.free_tier, usable, context=USAGE_TYPE)).entries
        return usable

    async def record(self, record: EnrichmentRecord, log_run: bool = True) -> None:
        await asyncio.to_thread(self.app.record_kg_enrichment, record)
        self.wake()
        if not record.complete:
            return
        self.runs += 1
        run = await asyncio.to_thread(self.app.kg_run, record.tenant_id, record.run_key)
        if run is not None and log_run:
            log_totals(str(run.id), record.trigger, record.project_id, run.totals())

    # -- reads --------------------------------------------------------------------------
    def _neighbours(self, tenant_id: str, lineage: FileLineage) -> list[LineageNode]:
        """Nodes one hop up- and downstream of what the file defines, as the graph has them."""
        found: dict[str, LineageNode] = {}
        defined = [n for n in lineage.nodes if n.kind in _NEIGHBOUR_KINDS and n.path]
        for node in defined[:8]:
            for direction in ("upstream", "downstream"):
                try:
                    sub = self.graph.traverse(tenant_id, node.urn, direction, 1)
                except Exception as error:  # the graph is a hint here, never a requirement
                    log.debug("no neighbours of %s: %s", node.urn, error)
                    continue
                found.update((n.urn, n) for n in sub.nodes)
        return [found[urn] for urn in sorted(found)]

    def _named(self, tenant_id: str, project_id: str, names: list[str]) -> list[LineageNode]:
        if not names:
            return []
        try:
            matches = self.graph.find_nodes(tenant_id, project_id, names)
        except Exception as error:
            log.debug("graph lookup failed: %s", error)
            return []
        return [n for nodes in matches.values() for n in nodes]

    def _open_proposals(self, tenant_id: str, project_id: str, path: str) -> list[str]:
        rows = self.kg_store.llm_edges(
            tenant_id, project_id, status="proposed", file_path=path, limit=1000
        )
        return [str(r["edge_id"]) for r in rows]

    async def _wait_for_kg(self, position: int) -> None:
        """Give the `kg` read model (the files of a project) a moment to reach `position`."""
        if self.kg_position is None:
            return
        deadline = time.monotonic() + self.options.read_model_wait_s
        while time.monotonic() < deadline:
            if self.kg_position() >= position:
                return
            await asyncio.sleep(0.05)

    def _once(self, key: str, message: str) -> None:
        if key not in self._said:
            self._said.add(key)
            log.info(message)


def enrichable(path: str) -> bool:
    return path.lower().endswith(ENRICHABLE_SUFFIXES)


def in_scope(path: str, scope: Sequence[str]) -> bool:
    """Every file when the scope is empty; else a path given, or one under a folder given."""
    if not scope:
        return True
    return any(path == s or path.startswith(s.rstrip("/") + "/") for s in scope)


def not_configured_text() -> str:
    return "KG edge creation model not configured"


def log_totals(run_id: str, trigger: str, project_id: str, totals: Mapping[str, Any]) -> None:
    """The run's line in the ingestion log (llm-service.md "KG agent logging")."""
    confidence = totals["confidence"]
    summary = ConfidenceSummary(confidence["min"], confidence["median"], confidence["max"])
    log.info(
        "KG enrichment run=%s trigger=%s project=%s outcome=%s files=%d proposed=%d "
        "accepted=%d dropped=%d failed=%d model=%s confidence=%s%s",
        run_id,
        trigger,
        project_id,
        totals["outcome"],
        totals["files"],
        totals["proposed"],
        totals["accepted"],
        totals["dropped"],
        totals["failed"],
        ",".join(totals["models"]) or "none",
        summary.text(),
        f" error={totals['error']}" if totals.get("error") else "",
    )


def _parse(path: str, code: Any, project_id: str) -> FileLineage:
    return extract_file_lineage(path, code.text, project_id, dialect=code.dialect, dbt=code.dbt)
