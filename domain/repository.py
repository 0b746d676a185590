"""Repositories: which files a project's source held at each ingest, and at which commit."""

from __future__ import annotations

from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

_NAMESPACE = UUID("1e2d3c4b-5a69-4788-9a0b-1c2d3e4f5a6b")


class Repository(Aggregate):
    """A source of files for a project (a git URL, an upload, a local folder)."""

    @staticmethod
    def create_id(tenant_id: str, project_id: str, source: str) -> UUID:
        return uuid5(_NAMESPACE, f"{tenant_id}/{project_id}/{source}")

    @event("RepositoryRegistered")
    def __init__(self, tenant_id: str, project_id: str, source: str) -> None:
        self.tenant_id = tenant_id
        self.project_id = project_id
        self.source = source
        self.paths: list[str] = []
        self.commit: str | None = None

    @event("RepositorySnapshotRecorded")
    def record_snapshot(
        self,
        ref: str | None,
        commit: str | None,
        paths: list[str],
        changed: int,
        deleted: list[str],
    ) -> None:
        self.paths = sorted(paths)
        self.commit = commit

    def removed_since_last(self, paths: list[str]) -> list[str]:
        return sorted(set(self.paths) - set(paths))
