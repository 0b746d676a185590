"""The `kg` read model's port: written by `projections.kg.KGProjection`, read by
`queries.kg.KGService` and by the enrichment policy (the files it may read, the open
proposals of a file)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

# One operation of a projection batch: (kind, data). Kinds: file, parsed, retract_edges,
# retract_file, llm_edge, run_requested, run_file, run_completed.
KGOperation = tuple[str, dict[str, Any]]


@runtime_checkable
class KGStore(Protocol):
    """Edge history, LLM edges, enrichment runs and files, per tenant, with checkpoints."""

    def ensure(self) -> None:
        """Create the tables; idempotent."""

    def drop(self) -> None:
        """Remove every row and checkpoint; the store stays usable."""

    def checkpoint(self, name: str) -> int: ...

    def apply(self, operations: Sequence[KGOperation], name: str, position: int) -> None:
        """Apply a batch in order and record `position`, in one transaction."""

    def llm_edges(
        self,
        tenant_id: str,
        project_id: str | None = None,
        status: str | None = None,
        verification: str | None = None,
        file_path: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """LLM edges, newest proposal first, filtered by every argument given."""

    def edge(self, tenant_id: str, edge_id: str) -> dict[str, Any] | None:
        """One edge (parser or LLM) as it stands, or None."""

    def history(self, tenant_id: str, edge_id: str) -> list[dict[str, Any]]:
        """Every event of an edge, oldest first: action, event_type, actor, occurred_at,
        position, details."""

    def runs(
        self,
        tenant_id: str,
        project_id: str | None = None,
        after_position: int = 0,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Enrichment runs requested after `after_position`, newest first."""

    def run(self, tenant_id: str, run_id: str) -> dict[str, Any] | None: ...

    def files(self, tenant_id: str, project_id: str) -> list[dict[str, Any]]:
        """The project's present files with the position of their last lineage event."""

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, sorted (to compare a rebuild with the live model)."""

    def close(self) -> None: ...
