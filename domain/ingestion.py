"""Source files: the aggregate that records what was ingested, and the rules for ingesting."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.chunking import Chunk
from domain.errors import BinaryContent, ContentTooLarge, EmptyPath, InvalidPath
from domain.graph import FileLineage
from domain.urn import Urn, validate_project_id

_NAMESPACE = UUID("6f1c7d2e-3b4a-4c5d-9e8f-0a1b2c3d4e5f")
DEFAULT_MAX_FILE_BYTES = 1_000_000


def normalise_path(path: str) -> str:
    """A repository-relative POSIX path; refuses empty paths and '..' escapes."""
    cleaned = path.strip().replace("\\", "/")
    if not cleaned:
        raise EmptyPath("the file path is empty")
    parts = [p for p in PurePosixPath(cleaned).parts if p not in ("/", ".")]
    if not parts:
        raise EmptyPath(f"the file path {path!r} names no file")
    if ".." in parts:
        raise InvalidPath(f"the file path {path!r} leaves the repository ('..')")
    return "/".join(parts)


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def check_content(path: str, content: str, max_bytes: int) -> None:
    size = len(content.encode())
    if size > max_bytes:
        raise ContentTooLarge(f"{path} is {size} bytes; the limit is {max_bytes} bytes")
    if "\x00" in content:
        raise BinaryContent(f"{path} looks binary (it contains NUL bytes)")


@dataclass(frozen=True, slots=True)
class FileToIngest:
    """A validated request to ingest one file's content."""

    tenant_id: str
    project_id: str
    path: str
    content: str
    source: str
    tags: tuple[str, ...]
    dialect: str | None = None

    @classmethod
    def validated(
        cls,
        *,
        tenant_id: str,
        project_id: str,
        path: str,
        content: str,
        source: str,
        tags: tuple[str, ...] | list[str],
        max_bytes: int = DEFAULT_MAX_FILE_BYTES,
        dialect: str | None = None,
    ) -> FileToIngest:
        clean_path = normalise_path(path)
        check_content(clean_path, content, max_bytes)
        return cls(
            tenant_id=tenant_id or "default",
            project_id=validate_project_id(project_id),
            path=clean_path,
            content=content,
            source=source or "upload",
            tags=tuple(sorted(set(tags))),
            dialect=dialect,
        )

    @property
    def file_urn(self) -> str:
        return str(Urn.for_file(self.project_id, self.path))


class SourceFile(Aggregate):
    """One file of a project and tenant, as last ingested."""

    @staticmethod
    def create_id(tenant_id: str, project_id: str, path: str) -> UUID:
        return uuid5(_NAMESPACE, f"{tenant_id}/{project_id}/{path}")

    @event("Registered")
    def __init__(self, tenant_id: str, project_id: str, path: str) -> None:
        self.tenant_id = tenant_id
        self.project_id = project_id
        self.path = path
        self.content_hash = ""
        self.edge_fingerprints: dict[str, str] = {}
        self.node_fingerprints: dict[str, str] = {}

    @event("FileIngested")
    def record_ingest(
        self, content_hash: str, size: int, source: str, tags: list[str], file_urn: str
    ) -> None:
        self.content_hash = content_hash

    @event("FileChunked")
    def record_chunks(
        self,
        tenant_id: str,
        project_id: str,
        path: str,
        file_urn: str,
        tags: list[str],
        content_hash: str,
        chunks: list[dict[str, Any]],
        source: str = "",
    ) -> None:
        pass

    @event("LineageExtracted")
    def record_lineage(
        self,
        tenant_id: str,
        project_id: str,
        path: str,
        file_urn: str,
        dialect: str | None,
        nodes: list[dict[str, Any]],
        edges: list[dict[str, Any]],
        warnings: list[str],
    ) -> None:
        self.node_fingerprints.update((n["urn"], _fingerprint(n)) for n in nodes)
        self.edge_fingerprints.update((e["edge_id"], _fingerprint(e)) for e in edges)

    @event("LineageEdgesRetracted")
    def retract_edges(
        self, tenant_id: str, project_id: str, path: str, edge_ids: list[str], reason: str
    ) -> None:
        for edge_id in edge_ids:
            self.edge_fingerprints.pop(edge_id, None)

    @event("FileDeleted")
    def delete(
        self, tenant_id: str, project_id: str, path: str, file_urn: str, reason: str
    ) -> None:
        self.content_hash = ""
        self.edge_fingerprints = {}
        self.node_fingerprints = {}

    def remove(self, reason: str) -> None:
        """Record the file's removal: its edges are retracted, its chunks and nodes dropped."""
        if self.edge_fingerprints:
            self.retract_edges(
                self.tenant_id, self.project_id, self.path, sorted(self.edge_fingerprints), reason
            )
        file_urn = str(Urn.for_file(self.project_id, self.path))
        self.delete(self.tenant_id, self.project_id, self.path, file_urn, reason)

    @property
    def present(self) -> bool:
        return bool(self.content_hash)

    def record_lineage_difference(self, lineage: FileLineage, dialect: str | None) -> None:
        """Record only what changed since the last version: new/changed and retracted edges."""
        nodes = [n.to_dict() for n in lineage.nodes]
        edges = [e.to_dict() for e in lineage.edges]
        current = {e["edge_id"] for e in edges}
        gone = sorted(set(self.edge_fingerprints) - current)
        if gone:
            self.retract_edges(
                self.tenant_id, self.project_id, self.path, gone, "no longer in the file"
            )
        changed_nodes = [
            n for n in nodes if self.node_fingerprints.get(n["urn"]) != _fingerprint(n)
        ]
        changed_edges = [
            e for e in edges if self.edge_fingerprints.get(e["edge_id"]) != _fingerprint(e)
        ]
        if changed_nodes or changed_edges or lineage.warnings:
            self.record_lineage(
                tenant_id=self.tenant_id,
                project_id=self.project_id,
                path=self.path,
                file_urn=str(Urn.for_file(self.project_id, self.path)),
                dialect=dialect,
                nodes=changed_nodes,
                edges=changed_edges,
                warnings=list(lineage.warnings),
            )


def _fingerprint(data: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def ingest(
    existing: SourceFile | None,
    request: FileToIngest,
    chunks: Sequence[Chunk],
    lineage: FileLineage | None = None,
) -> SourceFile | None:
    """Decide what ingesting `request` records: None when the content is unchanged.

    Chunks and lineage are computed by the caller (pure functions of the content), so the
    events carry facts and a replay never re-parses."""
    digest = content_hash(request.content)
    if existing is not None and existing.content_hash == digest:
        return None
    source_file = existing or SourceFile(request.tenant_id, request.project_id, request.path)
    tags = list(request.tags)
    source_file.record_ingest(
        content_hash=digest,
        size=len(request.content.encode()),
        source=request.source,
        tags=tags,
        file_urn=request.file_urn,
    )
    source_file.record_chunks(
        tenant_id=request.tenant_id,
        project_id=request.project_id,
        path=request.path,
        file_urn=request.file_urn,
        tags=tags,
        content_hash=digest,
        chunks=[c.to_dict() for c in chunks],
        source=request.source,
    )
    if lineage is not None:
        marked = with_access_tags(lineage, tags, request.path)
        source_file.record_lineage_difference(marked, request.dialect)
    return source_file


ACCESS_TAGS = "access_tags"


def with_access_tags(lineage: FileLineage, tags: Sequence[str], path: str) -> FileLineage:
    """Mark what a tagged file contributes to the graph with its access tags: its edges, and
    the nodes it defines. Graph retrieval shows them only to callers holding one of the tags
    (chunks carry the same tags in the vectors read model)."""
    if not tags:
        return lineage
    marked = sorted(set(tags))
    edges = tuple(
        replace(e, properties={**e.properties, ACCESS_TAGS: marked}) for e in lineage.edges
    )
    nodes = tuple(
        replace(n, properties={**n.properties, ACCESS_TAGS: marked}) if n.path == path else n
        for n in lineage.nodes
    )
    return replace(lineage, nodes=nodes, edges=edges)
