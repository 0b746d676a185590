"""Accumulates the nodes and edges one file contributes, merging duplicates (pure, no I/O).

The same dataset or relation is often found several times in one file (a table read by two
statements, a ``ref`` used twice). Nodes merge by URN (the kind only ever gets more specific,
properties are united); edges merge by :func:`domain.graph.edge_id` (the first occurrence's
evidence is kept, an unconditional occurrence beats a conditional one, the other occurrences
are listed in ``properties["also_at"]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from domain.graph import FileLineage, LineageEdge, LineageNode, NodeKind, Rel, edge_id, node_urn

Lines = tuple[int, int]

# A node seen with two kinds keeps the more specific one (table -> view -> dbt node).
_SPECIFICITY = {
    NodeKind.TABLE: 0,
    NodeKind.VIEW: 1,
    NodeKind.DBT_SOURCE: 2,
    NodeKind.DBT_SEED: 2,
    NodeKind.DBT_MODEL: 2,
}


@dataclass
class _NodeDraft:
    kind: NodeKind
    name: str
    path: str | None
    properties: dict[str, Any]


@dataclass
class _EdgeDraft:
    source: str
    target: str
    rel: Rel
    lines: Lines
    dialect: str | None
    confidence: float
    conditional: bool
    via: str | None
    provenance: str
    properties: dict[str, Any] = field(default_factory=dict)
    also_at: list[Lines] = field(default_factory=list)


class GraphBuilder:
    """Collects one file's nodes, edges and warnings; :meth:`build` freezes them."""

    def __init__(self, project_id: str, path: str, dialect: str | None = None) -> None:
        self.project_id = project_id
        self.path = path
        self.dialect = dialect
        self._nodes: dict[str, _NodeDraft] = {}
        self._edges: dict[str, _EdgeDraft] = {}
        self._warnings: list[str] = []
        self.file_urn = self.node(NodeKind.FILE, path, path)

    # -- nodes ----------------------------------------------------------------------------

    def node(self, kind: NodeKind, name: str, path: str | None = None, **properties: Any) -> str:
        """Add (or merge into) a node and return its URN."""
        urn = node_urn(kind, self.project_id, name)
        clean = {key: value for key, value in properties.items() if value is not None}
        draft = self._nodes.get(urn)
        if draft is None:
            self._nodes[urn] = _NodeDraft(kind, name, path, clean)
            return urn
        if _SPECIFICITY.get(kind, 0) > _SPECIFICITY.get(draft.kind, 0):
            draft.kind = kind
        if draft.path is None:
            draft.path = path
        draft.properties.update(clean)
        return urn

    def has_node(self, urn: str) -> bool:
        return urn in self._nodes

    # -- edges ----------------------------------------------------------------------------

    def edge(
        self,
        rel: Rel,
        source: str,
        target: str,
        lines: Lines,
        *,
        confidence: float = 1.0,
        conditional: bool = False,
        via: str | None = None,
        dialect: str | None = None,
        provenance: str = "parser",
        **properties: Any,
    ) -> None:
        """Add an edge, or merge this occurrence into the same relation found earlier."""
        if source == target:
            return
        start, end = max(1, lines[0]), max(1, lines[0], lines[1])
        key = edge_id(self.project_id, rel, source, target, self.path)
        clean = {name: value for name, value in properties.items() if value is not None}
        draft = self._edges.get(key)
        if draft is None:
            self._edges[key] = _EdgeDraft(
                source=source,
                target=target,
                rel=rel,
                lines=(start, end),
                dialect=dialect if dialect is not None else self.dialect,
                confidence=confidence,
                conditional=conditional,
                via=via,
                provenance=provenance,
                properties=clean,
            )
            return
        if draft.conditional and not conditional:
            # An unconditional occurrence is the better evidence: it becomes the edge's own.
            draft.also_at.append(draft.lines)
            draft.lines = (start, end)
            draft.conditional = False
        elif (start, end) != draft.lines and (start, end) not in draft.also_at:
            draft.also_at.append((start, end))
        draft.confidence = max(draft.confidence, confidence)
        if draft.via is None:
            draft.via = via
        for name, value in clean.items():
            draft.properties.setdefault(name, value)

    # -- warnings -------------------------------------------------------------------------

    def warn(self, message: str) -> None:
        text = message if message.startswith(self.path) else f"{self.path}: {message}"
        if text not in self._warnings:
            self._warnings.append(text)

    # -- result ---------------------------------------------------------------------------

    def build(self) -> FileLineage:
        nodes = tuple(
            LineageNode(urn, d.kind, d.name, self.project_id, d.path, dict(d.properties))
            for urn, d in self._nodes.items()
        )
        edges = tuple(self._frozen_edge(draft) for draft in self._edges.values())
        return FileLineage(nodes=nodes, edges=edges, warnings=tuple(self._warnings))

    def _frozen_edge(self, draft: _EdgeDraft) -> LineageEdge:
        properties = dict(draft.properties)
        if draft.also_at:
            properties["also_at"] = [list(lines) for lines in draft.also_at]
        return LineageEdge(
            source=draft.source,
            target=draft.target,
            rel=draft.rel,
            project_id=self.project_id,
            file_path=self.path,
            line_start=draft.lines[0],
            line_end=draft.lines[1],
            provenance=draft.provenance,
            dialect=draft.dialect,
            confidence=draft.confidence,
            conditional=draft.conditional,
            via=draft.via,
            properties=properties,
        )
