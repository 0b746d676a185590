"""The lineage graph in dicts: the reference `GraphStore` for unit tests."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from domain.graph import LineageEdge, LineageNode, NodeKind, Rel, Subgraph
from domain.graph_port import (
    DEFAULT_RELS,
    Direction,
    Step,
    breadth_first,
    check_traversal,
    edge_sort_key,
    edge_visible,
    group_by_name,
    latest_edges,
    merge_batch,
    merge_node,
    missing_endpoints,
    name_matches,
    node_sort_key,
)

_NodeKey = tuple[str, str]  # (tenant_id, urn)
_EdgeKey = tuple[str, str]  # (tenant_id, edge_id)


class InMemoryGraphStore:
    """Nodes and edges in dicts, with adjacency sets for traversal.

    Properties are copied through JSON on the way in, as the database adapters store them, so
    a test cannot pass here and fail there because of a tuple or a shared dict.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._nodes: dict[_NodeKey, LineageNode] = {}
        self._edges: dict[_EdgeKey, LineageEdge] = {}
        self._out: dict[_NodeKey, set[_EdgeKey]] = defaultdict(set)
        self._in: dict[_NodeKey, set[_EdgeKey]] = defaultdict(set)
        self._checkpoints: dict[str, int] = {}

    def ensure(self) -> None:
        return None

    def apply_file(
        self,
        tenant_id: str,
        project_id: str,
        file_path: str,
        nodes: Sequence[LineageNode],
        edges: Sequence[LineageEdge],
        retracted_edge_ids: Sequence[str],
    ) -> None:
        with self._lock:
            for eid in retracted_edge_ids:
                self._delete_edge((tenant_id, eid))
            for node in merge_batch(_json_copy_node(n) for n in nodes):
                key = (tenant_id, node.urn)
                self._nodes[key] = merge_node(self._nodes.get(key), node)
            for node in missing_endpoints(nodes, edges):
                self._nodes.setdefault((tenant_id, node.urn), node)
            for edge in latest_edges(_json_copy_edge(e) for e in edges):
                self._put_edge(tenant_id, edge)

    def _put_edge(self, tenant_id: str, edge: LineageEdge) -> None:
        key = (tenant_id, edge.edge_id)
        self._delete_edge(key)
        self._edges[key] = edge
        self._out[(tenant_id, edge.source)].add(key)
        self._in[(tenant_id, edge.target)].add(key)

    def _delete_edge(self, key: _EdgeKey) -> None:
        edge = self._edges.pop(key, None)
        if edge is None:
            return
        tenant_id = key[0]
        self._out[(tenant_id, edge.source)].discard(key)
        self._in[(tenant_id, edge.target)].discard(key)

    def remove_file(self, tenant_id: str, project_id: str, file_path: str) -> None:
        with self._lock:
            for key, _edge in list(self._file_edges(tenant_id, project_id, file_path)):
                self._delete_edge(key)
            for key, node in list(self._nodes.items()):
                if key[0] == tenant_id and _defined_in(node, project_id, file_path):
                    self._delete_if_isolated(key)

    def _delete_if_isolated(self, key: _NodeKey) -> None:
        if self._out.get(key) or self._in.get(key):
            return
        del self._nodes[key]
        self._out.pop(key, None)
        self._in.pop(key, None)

    def _file_edges(
        self, tenant_id: str, project_id: str, file_path: str
    ) -> Iterator[tuple[_EdgeKey, LineageEdge]]:
        for key, edge in self._edges.items():
            if key[0] == tenant_id and (edge.project_id, edge.file_path) == (project_id, file_path):
                yield key, edge

    def find_nodes(
        self, tenant_id: str, project_id: str | None, names: Sequence[str]
    ) -> dict[str, list[LineageNode]]:
        with self._lock:
            candidates = [
                node
                for (tenant, _urn), node in self._nodes.items()
                if tenant == tenant_id
                and (project_id is None or node.project_id == project_id)
                and any(name_matches(node, name) for name in names)
            ]
        return group_by_name(names, candidates)

    def get_node(self, tenant_id: str, urn: str) -> LineageNode | None:
        with self._lock:
            return self._nodes.get((tenant_id, urn))

    def traverse(
        self,
        tenant_id: str,
        urn: str,
        direction: Direction,
        hops: int,
        rels: Sequence[Rel] = DEFAULT_RELS,
        include_llm: bool = False,
    ) -> Subgraph:
        wanted = set(check_traversal(direction, hops, rels))
        upstream = direction == "upstream"

        def expand(frontier: Sequence[str]) -> Iterator[Step]:
            for origin in frontier:
                adjacency = self._out if upstream else self._in
                for key in adjacency.get((tenant_id, origin), ()):
                    edge = self._edges[key]
                    if str(edge.rel) in wanted and edge_visible(edge, include_llm):
                        other = edge.target if upstream else edge.source
                        yield Step(origin, edge, self._nodes[(tenant_id, other)])

        with self._lock:
            if (tenant_id, urn) not in self._nodes:
                return Subgraph(start=urn)
            return breadth_first(urn, hops, expand)

    def edges_of_file(self, tenant_id: str, project_id: str, file_path: str) -> list[LineageEdge]:
        with self._lock:
            found = [edge for _key, edge in self._file_edges(tenant_id, project_id, file_path)]
        return sorted(found, key=edge_sort_key)

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {"nodes": len(self._nodes), "edges": len(self._edges)}

    def most_connected_names(self, limit: int) -> list[str]:
        degree: dict[str, int] = defaultdict(int)
        with self._lock:
            for key, node in self._nodes.items():
                degree[node.name] += len(self._out.get(key, ())) + len(self._in.get(key, ()))
        ranked = sorted((-d, name) for name, d in degree.items() if d)
        return [name for _, name in ranked[:limit]]

    def dump(self) -> tuple[list[LineageNode], list[LineageEdge]]:
        with self._lock:
            nodes = sorted(self._nodes.values(), key=node_sort_key)
            edges = sorted(self._edges.values(), key=edge_sort_key)
        return nodes, edges

    def checkpoint(self, name: str) -> int:
        with self._lock:
            return self._checkpoints.get(name, 0)

    def save_checkpoint(self, name: str, position: int) -> None:
        with self._lock:
            self._checkpoints[name] = position

    def drop(self) -> None:
        with self._lock:
            self._nodes.clear()
            self._edges.clear()
            self._out.clear()
            self._in.clear()
            self._checkpoints.clear()

    def close(self) -> None:
        return None


def _defined_in(node: LineageNode, project_id: str, file_path: str) -> bool:
    """The node is defined in the file, or is the file itself."""
    if node.project_id != project_id:
        return False
    return node.path == file_path or (node.kind == NodeKind.FILE and node.name == file_path)


def _json_copy(properties: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(properties, sort_keys=True, default=str))
    return copied


def _json_copy_node(node: LineageNode) -> LineageNode:
    return replace(node, properties=_json_copy(node.properties))


def _json_copy_edge(edge: LineageEdge) -> LineageEdge:
    return replace(edge, properties=_json_copy(edge.properties))
