"""Lineage questions answered from the graph read model: upstream, downstream, lookups."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from domain.errors import InvalidCommand, UpstreamError
from domain.graph import DATASET_KINDS, LineageNode, NodeKind, Rel, Subgraph
from domain.graph_port import Direction, GraphStore, Step, breadth_first

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
    llm_edges: str = "accepted"

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start.to_dict(),
            "direction": self.direction,
            "hops": self.hops,
            "include_llm": self.llm_edges,
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
    if edge["provenance"] == "llm":  # who proposed it, how sure, what the parser says
        props = edge["properties"]
        edge["evidence"].update(
            {k: props.get(k) for k in ("source", "model", "status", "verification", "reasoning")}
        )
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
        include_llm: bool | str = "accepted",
    ) -> LineageAnswer:
        """`include_llm`: which LLM-proposed edges to follow besides the parser's: `none`,
        `accepted` (the default) or `proposed` (every open one; True means the same)."""
        mode = llm_edge_mode(include_llm)
        start = self.resolve(tenant_id, project_id, ref)
        rels = (Rel.DERIVES,) if start.kind == NodeKind.COLUMN else (Rel.READS_FROM,)
        every = mode == "proposed"
        subgraph = self.graph.traverse(tenant_id, start.urn, direction, hops, rels, every)
        if mode == "none" and any(e.provenance == "llm" for e in subgraph.edges):
            subgraph = parser_only(subgraph, start, direction, hops)
        return LineageAnswer(start, direction, hops, subgraph, mode)

    def lookup(
        self, tenant_id: str, project_id: str | None, names: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        found = self.graph.find_nodes(tenant_id, project_id, names)
        return {name: [n.to_dict() for n in nodes] for name, nodes in found.items()}


LLM_EDGE_MODES = ("none", "accepted", "proposed")


class InvalidLlmEdgeMode(InvalidCommand):
    code = "invalid_include_llm"
    hint = "include_llm is none (parser edges only), accepted (the default) or proposed."


def llm_edge_mode(value: bool | str | None) -> str:
    """`none` | `accepted` | `proposed` from the query parameter (true/false accepted too)."""
    if value is None or value is False:
        return "accepted"
    if value is True:
        return "proposed"
    text = value.strip().lower()
    aliases = {"true": "proposed", "all": "proposed", "false": "accepted", "parser": "none"}
    mode = aliases.get(text, text)
    if mode not in LLM_EDGE_MODES:
        raise InvalidLlmEdgeMode(f"include_llm must be none, accepted or proposed, not {value!r}")
    return mode


def parser_only(
    subgraph: Subgraph, start: LineageNode, direction: Direction, hops: int
) -> Subgraph:
    """The same walk over parser edges only, from a walk that also followed accepted LLM edges
    (it holds every parser edge the narrower walk can reach, so walking it again is exact)."""
    parser_edges = [e for e in subgraph.edges if e.provenance != "llm"]
    nodes = {n.urn: n for n in (*subgraph.nodes, start)}
    upstream = direction == "upstream"

    def expand(frontier: Sequence[str]) -> Iterator[Step]:
        wanted = set(frontier)
        for edge in parser_edges:
            origin, other = (edge.source, edge.target) if upstream else (edge.target, edge.source)
            if origin in wanted and other in nodes:
                yield Step(origin, edge, nodes[other])

    return breadth_first(subgraph.start, hops, expand)


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
