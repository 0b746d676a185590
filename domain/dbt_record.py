"""dbt projects as the write side knows them: learned from each `dbt_project.yml` ingested."""

from __future__ import annotations

import posixpath
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.dbt import PROJECT_FILE, DbtProject

_NAMESPACE = UUID("5d4c3b2a-1908-4f7e-8d6c-5b4a39281706")


class DbtProjectRecord(Aggregate):
    """The `dbt_project.yml` found at `root` in a project; models are recognised by it."""

    @staticmethod
    def create_id(tenant_id: str, project_id: str, root: str) -> UUID:
        return uuid5(_NAMESPACE, f"{tenant_id}/{project_id}/{root}")

    @event("DbtProjectDetected")
    def __init__(self, tenant_id: str, project_id: str, root: str, content: str) -> None:
        self.tenant_id = tenant_id
        self.project_id = project_id
        self.root = root
        self.content = content

    @event("DbtProjectChanged")
    def change(self, content: str) -> None:
        self.content = content

    def project(self) -> DbtProject | None:
        try:
            return DbtProject.from_files({project_file(self.root): self.content}, self.root)
        except ValueError:
            return None


def project_file(root: str) -> str:
    return posixpath.join(root, PROJECT_FILE) if root else PROJECT_FILE


def dbt_root_of(path: str) -> str | None:
    """The project root when `path` is a `dbt_project.yml`, else None."""
    if posixpath.basename(path) != PROJECT_FILE:
        return None
    return posixpath.dirname(path)


def candidate_roots(path: str) -> list[str]:
    """Folders that may hold the dbt project of `path`, nearest first."""
    folder = posixpath.dirname(path)
    roots = []
    while folder:
        roots.append(folder)
        folder = posixpath.dirname(folder)
    return [*roots, ""]
