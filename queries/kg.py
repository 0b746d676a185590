"""Knowledge-graph enrichment, read side: LLM edges to review, each edge's history, the
enrichment runs, and whether enrichment can run at all (CFG-12.1: the `kg_edge_creation`
chain, 503 "KG edge creation model not configured" without one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.errors import InvalidCommand, UpstreamError
from domain.kg.aggregates import EDGE_STATUSES
from domain.kg.ports import KGStore
from domain.kg.proposals import ConfidenceSummary
from domain.kg.verify import VERIFICATIONS
from domain.model_config import all_disabled, not_configured
from projections.kg_enrichment import USAGE_TYPE, enrichable

NOT_CONFIGURED_HINT = (
    "Configure a model for usage type kg_edge_creation (POST /api/v1/models/config, e.g. an "
    "openai_compatible, ollama or openrouter model); the offline extractive provider proposes "
    "no edges."
)


class EdgeHistoryNotFound(UpstreamError):
    code = "edge_not_found"
    hint = "Edge ids are in lineage answers (`edges[].edge_id`) and in `upstream kg list`."


class EnrichmentRunNotFound(UpstreamError):
    code = "enrichment_run_not_found"
    hint = "List the runs with GET /api/v1/kg/runs (or `upstream kg runs`)."


class InvalidKGFilter(InvalidCommand):
    code = "invalid_kg_filter"
    hint = f"status: {', '.join(EDGE_STATUSES)}; verification: {', '.join(VERIFICATIONS)}."


class KGService:
    """Reads the `kg` read model and the `kg_edge_creation` chain of the model configurations."""

    def __init__(self, store: KGStore, model_configs: Any) -> None:
        self.store = store
        self.model_configs = model_configs

    # -- the chain ------------------------------------------------------------------------
    def usable_chain(self) -> list[dict[str, Any]]:
        """Enabled `kg_edge_creation` configurations that can propose edges (not extractive)."""
        rows = self.model_configs.fallback_chain(USAGE_TYPE)
        return [r for r in rows if r.get("provider") != "extractive"]

    def require_chain(self) -> list[dict[str, Any]]:
        """The usable chain, or the spec's 503 (not configured / all disabled)."""
        usable = self.usable_chain()
        if usable:
            return usable
        configured = self.model_configs.list_configs(usage_type=USAGE_TYPE)
        if configured and not any(c.get("enabled") for c in configured):
            raise all_disabled(USAGE_TYPE)
        error = not_configured(USAGE_TYPE)
        error.detail_hint = NOT_CONFIGURED_HINT
        raise error

    def status(self) -> dict[str, Any]:
        usable = self.usable_chain()
        return {
            "enabled": bool(usable),
            "models": [f"{r['provider']}:{r['model_id']}" for r in usable],
            "reason": None if usable else "KG edge creation model not configured",
        }

    # -- edges ----------------------------------------------------------------------------
    def edges(
        self,
        tenant_id: str,
        project_id: str | None = None,
        status: str | None = None,
        verification: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        if status is not None and status not in EDGE_STATUSES:
            raise InvalidKGFilter(f"unknown status {status!r}")
        if verification is not None and verification not in VERIFICATIONS:
            raise InvalidKGFilter(f"unknown verification {verification!r}")
        return self.store.llm_edges(
            tenant_id, project_id, status, verification, limit=limit, offset=offset
        )

    def history(self, tenant_id: str, edge_id: str) -> dict[str, Any]:
        """An edge as it stands and every event of it, oldest first (404 when unknown)."""
        events = self.store.history(tenant_id, edge_id)
        edge = self.store.edge(tenant_id, edge_id)
        if not events or edge is None:
            raise EdgeHistoryNotFound(f"no lineage edge with id {edge_id!r}")
        return {"edge_id": edge_id, "edge": edge, "events": events, "count": len(events)}

    # -- runs -----------------------------------------------------------------------------
    def runs(
        self,
        tenant_id: str,
        project_id: str | None = None,
        after_position: int = 0,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        return self.store.runs(tenant_id, project_id, after_position, limit)

    def run(self, tenant_id: str, run_id: str) -> dict[str, Any]:
        found = self.store.run(tenant_id, run_id)
        if found is None:
            raise EnrichmentRunNotFound(f"no enrichment run with id {run_id!r}")
        return found

    def summary(self, tenant_id: str, project_id: str, after_position: int = 0) -> dict[str, Any]:
        """What enrichment did for a project since `after_position` (what `upstream ingest`
        prints): runs done, files still pending, proposed/accepted counts, models, confidence."""
        status = self.status()
        runs = self.store.runs(tenant_id, project_id, after_position, limit=10_000)
        done = [r for r in runs if r["status"] != "requested"]
        pending = (
            self._pending(tenant_id, project_id, after_position, runs) if status["enabled"] else []
        )
        files = [f for r in done for f in r["files"]]
        confidences = [c for f in files for c in f.get("confidences", [])]
        return {
            "project_id": project_id,
            "after_position": after_position,
            **status,
            "runs": len(done),
            "running": len(runs) - len(done),
            "pending_files": len(pending),
            "files": len(files),
            "proposed": sum(int(f.get("proposed", 0)) for f in files),
            "accepted": sum(int(f.get("accepted", 0)) for f in files),
            "dropped": sum(sum(f.get("dropped", {}).values()) for f in files),
            "failed": sum(1 for f in files if f.get("outcome") == "failed_open"),
            "models_used": sorted({f["model"] for f in files if f.get("model")}),
            "confidence": ConfidenceSummary.of(confidences).to_dict(),
            "errors": sorted({f["error"] for f in files if f.get("error")})[:5],
        }

    def _pending(
        self, tenant_id: str, project_id: str, after: int, runs: Sequence[dict[str, Any]]
    ) -> list[str]:
        covered: dict[str, int] = {}
        for run in runs:
            if run["trigger"] == "ingest" and run["status"] != "requested":
                for path in run["scope"]:
                    covered[path] = max(covered.get(path, 0), int(run["trigger_position"] or 0))
        return [
            f["path"]
            for f in self.store.files(tenant_id, project_id)
            if f["lineage_position"] > after
            and enrichable(f["path"])
            and covered.get(f["path"], 0) < f["lineage_position"]
        ]
