"""The lineage graph read model's storage port, and the rules every adapter shares.

`GraphStore` is the port; the functions below it are the contract's semantics written once
(node merging, name matching, the LLM-edge filter, breadth-first traversal), so the in-memory
reference and the database adapters cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from domain.graph import LineageEdge, LineageNode, NodeKind, Rel, Subgraph
from domain.urn import Urn

Direction = Literal["upstream", "downstream"]
DEFAULT_RELS: tuple[Rel, ...] = (Rel.READS_FROM, Rel.DERIVES)
MAX_HOPS = 5


@runtime_checkable
class GraphStore(Protocol):
    """The lineage graph read model, per tenant, with its projection checkpoint stored inside.

    Nodes are keyed by (tenant_id, urn) and edges by (tenant_id, edge_id): a tenant never sees
    another tenant's nodes or edges. Edge directions follow `domain.graph`'s docstring.
    """

    def ensure(self) -> None:
        """Create the schema, constraints and indexes; idempotent."""

    def apply_file(
        self,
        tenant_id: str,
        project_id: str,
        file_path: str,
        nodes: Sequence[LineageNode],
        edges: Sequence[LineageEdge],
        retracted_edge_ids: Sequence[str],
    ) -> None:
        """Apply what one file contributes, in one batch.

        Deletes the retracted edges, then upserts the nodes (see `merge_node`: a kind only
        becomes more specific, `path` and `properties` are kept when not given), then upserts
        the edges (their properties replaced). An edge endpoint that is neither stored nor in
        `nodes` is created as a placeholder derived from its URN (see `placeholder_node`).
        """

    def remove_file(self, tenant_id: str, project_id: str, file_path: str) -> None:
        """Delete every edge found in the file, then the nodes defined in it (`path` is the
        file, or the file node itself) that are left with no edges."""

    def find_nodes(
        self, tenant_id: str, project_id: str | None, names: Sequence[str]
    ) -> dict[str, list[LineageNode]]:
        """Look many names up in one query, case-insensitively (see `name_matches`).

        Every name given is a key of the result (an empty list when nothing matches); each list
        is sorted by urn. `project_id=None` searches every project of the tenant.
        """

    def get_node(self, tenant_id: str, urn: str) -> LineageNode | None: ...

    def traverse(
        self,
        tenant_id: str,
        urn: str,
        direction: Direction,
        hops: int,
        rels: Sequence[Rel] = DEFAULT_RELS,
        include_llm: bool = False,
    ) -> Subgraph:
        """Walk `hops` (1..5) steps along `rels`, never revisiting a node.

        Upstream follows the start node's outgoing edges, downstream its incoming ones. LLM
        edges are skipped unless `include_llm` or accepted (see `edge_visible`). The answer
        holds every node reached (not the start) sorted by urn, every edge followed from a node
        less than `hops` steps away (sorted by `edge_sort_key`), and for each node reached the
        shortest path from the start (the smallest one when several tie), shortest first. An
        unknown start gives an empty subgraph.
        """

    def edges_of_file(self, tenant_id: str, project_id: str, file_path: str) -> list[LineageEdge]:
        """The edges found in one file, sorted by `edge_sort_key`."""

    def counts(self) -> dict[str, int]:
        """{"nodes": ..., "edges": ...} over every tenant (checkpoints not counted)."""

    def most_connected_names(self, limit: int) -> list[str]:
        """The names of the `limit` nodes with the most edges (in and out, over every tenant;
        nodes of one name count together), most connected first, ties by name."""

    def dump(self) -> tuple[list[LineageNode], list[LineageEdge]]:
        """Every node and edge of every tenant, sorted (to compare a rebuilt graph with a live
        one)."""

    def checkpoint(self, name: str) -> int:
        """The last event position projection `name` applied (0 when none)."""

    def save_checkpoint(self, name: str, position: int) -> None: ...

    def drop(self) -> None:
        """Remove every node, edge and checkpoint; the store stays usable."""

    def close(self) -> None: ...


# --- keys and matching -------------------------------------------------------------------


def node_key(tenant_id: str, urn: str) -> str:
    return f"{tenant_id}|{urn}"


def edge_key(tenant_id: str, edge_id: str) -> str:
    return f"{tenant_id}|{edge_id}"


def last_segment(kind: NodeKind, name: str) -> str:
    """The lower-cased short name: `marts.customer_summary` -> `customer_summary`.

    The part after a `#` counts (`models/x.sql#recent` -> `recent`, `etl.py#Job.run` -> `run`);
    a file's short name is its base name (`models/x.sql` -> `x.sql`), not its extension.
    """
    tail = name.rsplit("#", 1)[-1]
    if kind == NodeKind.FILE and "#" not in name:
        return tail.rsplit("/", 1)[-1].lower()
    return tail.rsplit(".", 1)[-1].lower()


def name_matches(node: LineageNode, query: str) -> bool:
    """`query` equals the node's name or short name (ignoring case), or its urn exactly."""
    wanted = query.lower()
    return (
        node.name.lower() == wanted
        or last_segment(node.kind, node.name) == wanted
        or node.urn == query
    )


def group_by_name(
    names: Sequence[str], candidates: Iterable[LineageNode]
) -> dict[str, list[LineageNode]]:
    """Assign candidates to every name they match; lists sorted by urn, one entry per urn."""
    pool = {node.urn: node for node in candidates}
    ordered = [pool[urn] for urn in sorted(pool)]
    return {name: [n for n in ordered if name_matches(n, name)] for name in names}


# --- upsert semantics --------------------------------------------------------------------


def merge_node(existing: LineageNode | None, incoming: LineageNode) -> LineageNode:
    """The stored node after an upsert: a `table` never overwrites a more specific kind,
    `path` and `properties` are replaced only when given (non-empty)."""
    if existing is None:
        return incoming
    return LineageNode(
        urn=incoming.urn,
        kind=_more_specific(existing.kind, incoming.kind),
        name=incoming.name,
        project_id=incoming.project_id,
        path=incoming.path if incoming.path is not None else existing.path,
        properties=dict(incoming.properties or existing.properties),
    )


_SPECIFICITY = {
    NodeKind.TABLE: 0,
    NodeKind.VIEW: 1,
    NodeKind.DBT_MODEL: 2,
    NodeKind.DBT_SEED: 3,  # a ref() cannot tell a seed from a model; the seed file can
    NodeKind.DBT_SOURCE: 3,
}


def _more_specific(existing: NodeKind, incoming: NodeKind) -> NodeKind:
    """Dataset kinds only ever become more specific; other kinds take the incoming one."""
    if existing in _SPECIFICITY and incoming in _SPECIFICITY:
        return existing if _SPECIFICITY[existing] > _SPECIFICITY[incoming] else incoming
    return incoming


def merge_batch(nodes: Iterable[LineageNode]) -> list[LineageNode]:
    """One node per urn, merged in order with `merge_node` (a batch may repeat a node)."""
    merged: dict[str, LineageNode] = {}
    for node in nodes:
        merged[node.urn] = merge_node(merged.get(node.urn), node)
    return list(merged.values())


def latest_edges(edges: Iterable[LineageEdge]) -> list[LineageEdge]:
    """One edge per edge_id, the last one given winning."""
    return list({edge.edge_id: edge for edge in edges}.values())


_KIND_OF_URN_TYPE = {
    "dataset": NodeKind.TABLE,
    "column": NodeKind.COLUMN,
    "cte": NodeKind.CTE,
    "procedure": NodeKind.PROCEDURE,
    "file": NodeKind.FILE,
    "function": NodeKind.PYTHON_FUNCTION,
}


def placeholder_node(urn: str, project_id: str) -> LineageNode:
    """A node for an edge endpoint nobody described yet: kind and name read from its URN."""
    try:
        parsed = Urn.parse(urn)
    except ValueError:
        return LineageNode(urn, NodeKind.TABLE, urn, project_id)
    kind = _KIND_OF_URN_TYPE.get(parsed.entity_type, NodeKind.TABLE)
    return LineageNode(urn, kind, parsed.asset_path, parsed.project_id)


def missing_endpoints(
    nodes: Sequence[LineageNode], edges: Sequence[LineageEdge]
) -> list[LineageNode]:
    """Placeholders for the edge endpoints not among `nodes` (the store keeps existing ones)."""
    given = {node.urn for node in nodes}
    wanted: dict[str, str] = {}
    for edge in edges:
        for urn in (edge.source, edge.target):
            if urn not in given:
                wanted.setdefault(urn, edge.project_id)
    return [placeholder_node(urn, wanted[urn]) for urn in sorted(wanted)]


# --- traversal ---------------------------------------------------------------------------


def edge_visible(edge: LineageEdge, include_llm: bool) -> bool:
    """Parser edges always; LLM-proposed ones when asked for, or once accepted."""
    return edge.provenance != "llm" or include_llm or edge.properties.get("status") == "accepted"


def check_traversal(direction: str, hops: int, rels: Sequence[Rel]) -> tuple[str, ...]:
    """Validate a traversal request; return the relation names to follow."""
    if direction not in ("upstream", "downstream"):
        raise ValueError(f"direction must be 'upstream' or 'downstream', not {direction!r}")
    if not 1 <= hops <= MAX_HOPS:
        raise ValueError(f"hops must be between 1 and {MAX_HOPS}, not {hops}")
    return tuple(sorted({str(Rel(rel)) for rel in rels}))


def edge_sort_key(edge: LineageEdge) -> tuple[Any, ...]:
    return (edge.source, str(edge.rel), edge.target, edge.file_path, edge.line_start, edge.edge_id)


def node_sort_key(node: LineageNode) -> tuple[Any, ...]:
    return (node.urn, node.project_id, str(node.kind), node.name, node.path or "")


@dataclass(frozen=True, slots=True)
class Step:
    """One edge followed during a traversal: from `origin` (already reached) to `node`."""

    origin: str
    edge: LineageEdge
    node: LineageNode


Expand = Callable[[Sequence[str]], Iterable[Step]]


def breadth_first(start: str, hops: int, expand: Expand) -> Subgraph:
    """Traverse level by level; `expand(frontier_urns)` gives the visible steps out of them.

    `expand` is called at most `hops` times, once per level, so a store needs one query per hop.
    """
    paths: dict[str, tuple[str, ...]] = {start: (start,)}
    nodes: dict[str, LineageNode] = {}
    edges: dict[str, LineageEdge] = {}
    frontier = [start]
    for _ in range(hops):
        if not frontier:
            break
        found: dict[str, tuple[str, ...]] = {}
        for step in expand(frontier):
            edges[step.edge.edge_id] = step.edge
            urn = step.node.urn
            if urn in paths:
                continue
            candidate = (*paths[step.origin], urn)
            if urn not in found or candidate < found[urn]:
                found[urn] = candidate
                nodes[urn] = step.node
        paths.update(found)
        frontier = sorted(found)
    return _subgraph(start, nodes.values(), edges.values(), paths.values())


def from_paths(
    start: str, walks: Iterable[tuple[Sequence[LineageNode], Sequence[LineageEdge]]]
) -> Subgraph:
    """Build the same answer as `breadth_first` from every walk of 1..hops edges out of `start`
    (what a variable-length Cypher pattern returns): each walk is its nodes (start first) and its
    edges, in order."""
    paths: dict[str, tuple[str, ...]] = {}
    nodes: dict[str, LineageNode] = {}
    edges: dict[str, LineageEdge] = {}
    for walk_nodes, walk_edges in walks:
        for edge in walk_edges:
            edges[edge.edge_id] = edge
        end = walk_nodes[-1]
        if end.urn == start:
            continue
        urns = tuple(node.urn for node in walk_nodes)
        best = paths.get(end.urn)
        if best is None or (len(urns), urns) < (len(best), best):
            paths[end.urn] = urns
            nodes[end.urn] = end
    return _subgraph(start, nodes.values(), edges.values(), paths.values())


def _subgraph(
    start: str,
    nodes: Iterable[LineageNode],
    edges: Iterable[LineageEdge],
    paths: Iterable[tuple[str, ...]],
) -> Subgraph:
    return Subgraph(
        start=start,
        nodes=tuple(sorted(nodes, key=node_sort_key)),
        edges=tuple(sorted(edges, key=edge_sort_key)),
        paths=tuple(sorted((p for p in paths if len(p) > 1), key=lambda p: (len(p), p))),
    )
