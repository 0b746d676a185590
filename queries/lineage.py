"""Lineage questions answered from the graph read model: upstream, downstream, lookups."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain.errors import UpstreamError
from domain.graph import DATASET_KINDS, LineageNode, NodeKind, Rel, Subgraph
from domain.graph_port import Direction, GraphStore

DEFAULT_HOPS = 3


class EntityNotFound(UpstreamError):
    code = "entity_not_found"
    hint = "Check the name or URN (`upstream search` finds files); ingest the repository first."


class AmbiguousEntity(UpstreamError):
    code = "ambiguous_entity"
    hint = "Use one of the URNs listed, or pass --project / project_id."


@dataclass(frozen=True, slots=True)
class LineageAnswer:
    start: LineageNode
    direction: Direction
    hops: int
    subgraph: Subgraph

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start.to_dict(),
            "direction": self.direction,
            "hops": self.hops,
            "nodes": [n.to_dict() for n in self.subgraph.nodes],
            "edges": [_evidence(e.to_dict()) for e in self.subgraph.edges],
            "paths": [list(p) for p in self.subgraph.paths],
        }


def _evidence(edge: dict[str, Any]) -> dict[str, Any]:
    edge["evidence"] = {
        "file": edge["file_path"],
        "lines": [edge["line_start"], edge["line_end"]],
        "provenance": edge["provenance"],
        "confidence": edge["confidence"],
        "conditional": edge["conditional"],
    }
    return edge


class LineageService:
    """Resolves a name or URN to one node, then walks the graph from it."""

    def __init__(self, graph: GraphStore) -> None:
        self.graph = graph

    def resolve(self, tenant_id: str, project_id: str | None, ref: str) -> LineageNode:
        if ref.startswith("urn:li:"):
            node = self.graph.get_node(tenant_id, ref)
            if node is None:
                raise EntityNotFound(f"no entity {ref} in the lineage graph")
            return node
        found = self.graph.find_nodes(tenant_id, project_id, [ref])[ref]
        return _one(ref, found)

    def walk(
        self,
        tenant_id: str,
        project_id: str | None,
        ref: str,
        direction: Direction,
        hops: int = DEFAULT_HOPS,
        include_llm: bool = False,
    ) -> LineageAnswer:
        start = self.resolve(tenant_id, project_id, ref)
        rels = (Rel.DERIVES,) if start.kind == NodeKind.COLUMN else (Rel.READS_FROM,)
        subgraph = self.graph.traverse(tenant_id, start.urn, direction, hops, rels, include_llm)
        return LineageAnswer(start, direction, hops, subgraph)

    def lookup(
        self, tenant_id: str, project_id: str | None, names: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        found = self.graph.find_nodes(tenant_id, project_id, names)
        return {name: [n.to_dict() for n in nodes] for name, nodes in found.items()}


def _one(ref: str, found: list[LineageNode]) -> LineageNode:
    if not found:
        raise EntityNotFound(f"no table, model, column or function named {ref!r}")
    if len(found) == 1:
        return found[0]
    datasets = [n for n in found if n.kind in DATASET_KINDS]
    exact = [n for n in datasets if n.name.lower() == ref.lower()]
    for candidates in (exact, datasets):
        if len(candidates) == 1:
            return candidates[0]
    listed = ", ".join(n.urn for n in found[:10])
    raise AmbiguousEntity(f"{ref!r} names {len(found)} entities: {listed}")
