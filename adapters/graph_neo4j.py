"""The lineage graph in Neo4j 5 (a server), through the official `neo4j` Python driver.

Model: ``(:Node {key: "tenant_id|urn", urn, tenant_id, project_id, kind, name, lname, lseg, path,
properties})`` with one relationship type per `Rel` (``READS_FROM``, ``WRITES_TO``, ``DERIVES``,
``DEFINED_IN``) carrying ``key`` (``tenant_id|edge_id``), the evidence fields, ``status``
(``properties.status``) and ``properties`` (JSON, since Neo4j properties cannot be maps);
``(:Checkpoint {name, position})`` holds the projections' positions.

Relationship types cannot be query parameters, so the queries that name one are built once, at
import, from the `Rel` enum; every value is a parameter.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from typing import Any

from neo4j import Driver, GraphDatabase, ManagedTransaction, RoutingControl

from adapters.graph_rows import dumps, node_row
from domain.graph import LineageEdge, LineageNode, NodeKind, Rel, Subgraph
from domain.graph_port import (
    DEFAULT_RELS,
    Direction,
    check_traversal,
    edge_key,
    edge_sort_key,
    from_paths,
    group_by_name,
    latest_edges,
    merge_batch,
    missing_endpoints,
    node_key,
    node_sort_key,
)

log = logging.getLogger(__name__)

_RELS = tuple(str(rel) for rel in Rel)
_SCHEMA = (
    "CREATE CONSTRAINT upstream_node_key IF NOT EXISTS FOR (n:Node) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT upstream_checkpoint_name IF NOT EXISTS "
    "FOR (c:Checkpoint) REQUIRE c.name IS UNIQUE",
    "CREATE INDEX upstream_node_lname IF NOT EXISTS FOR (n:Node) ON (n.tenant_id, n.lname)",
    "CREATE INDEX upstream_node_lseg IF NOT EXISTS FOR (n:Node) ON (n.tenant_id, n.lseg)",
    "CREATE INDEX upstream_node_path IF NOT EXISTS FOR (n:Node) ON (n.tenant_id, n.path)",
    *(
        f"CREATE INDEX upstream_{rel.lower()}_key IF NOT EXISTS FOR ()-[e:{rel}]-() ON (e.key)"
        for rel in _RELS
    ),
    *(
        f"CREATE INDEX upstream_{rel.lower()}_file IF NOT EXISTS "
        f"FOR ()-[e:{rel}]-() ON (e.tenant_id, e.file_path)"
        for rel in _RELS
    ),
)

_NODE_SET = """n.project_id = row.project_id, n.name = row.name, n.lname = row.lname,
  n.lseg = row.lseg"""
_UPSERT_NODES = f"""
UNWIND $rows AS row
MERGE (n:Node {{key: row.key}})
ON CREATE SET n.urn = row.urn, n.tenant_id = row.tenant_id, n.kind = row.kind, {_NODE_SET},
  n.path = row.path, n.properties = row.properties
ON MATCH SET n.kind = CASE WHEN row.kind = 'table' THEN n.kind ELSE row.kind END, {_NODE_SET},
  n.path = coalesce(row.path, n.path),
  n.properties = CASE WHEN row.properties = '{{}}' THEN n.properties ELSE row.properties END
"""
_CREATE_MISSING_NODES = f"""
UNWIND $rows AS row
MERGE (n:Node {{key: row.key}})
ON CREATE SET n.urn = row.urn, n.tenant_id = row.tenant_id, n.kind = row.kind, {_NODE_SET},
  n.path = row.path, n.properties = row.properties
"""
_RETRACT = {rel: f"UNWIND $keys AS k MATCH ()-[e:{rel} {{key: k}}]->() DELETE e" for rel in _RELS}
_UPSERT_EDGES = {
    rel: f"""
UNWIND $rows AS row
MATCH (s:Node {{key: row.source_key}})
MATCH (t:Node {{key: row.target_key}})
MERGE (s)-[e:{rel} {{key: row.key}}]->(t)
SET e = row.props
"""
    for rel in _RELS
}
_FILE_EDGE_MATCH = (
    "MATCH (s:Node)-[e:{rel}]->(t:Node) WHERE e.tenant_id = $tenant AND e.file_path = $file "
    "AND e.project_id = $project"
)
_DELETE_FILE_EDGES = {rel: _FILE_EDGE_MATCH.format(rel=rel) + " DELETE e" for rel in _RELS}
_EDGE_RETURN = "RETURN s.urn AS source, t.urn AS target, type(e) AS rel, properties(e) AS props"
_FILE_EDGES = " UNION ALL ".join(
    _FILE_EDGE_MATCH.format(rel=rel) + " " + _EDGE_RETURN for rel in _RELS
)
_DELETE_ORPHANS = """
MATCH (n:Node)
WHERE n.tenant_id = $tenant AND n.project_id = $project
  AND (n.path = $file OR (n.kind = 'file' AND n.name = $file))
  AND NOT EXISTS { MATCH (n)--() }
DELETE n
"""
_IN_PROJECT = "($project IS NULL OR n.project_id = $project)"
_FIND = " UNION ".join(
    f"MATCH (n:Node) WHERE {match} AND {_IN_PROJECT} RETURN properties(n) AS props"
    for match in (
        "n.tenant_id = $tenant AND n.lname IN $lnames",
        "n.tenant_id = $tenant AND n.lseg IN $lnames",
        "n.key IN $keys",
    )
)
_WALK = """
MATCH (s:Node {{key: $key}})
MATCH p = (s){arrow}(n:Node)
WHERE all(e IN relationships(p) WHERE e.provenance <> 'llm' OR $include_llm
          OR coalesce(e.status, '') = 'accepted')
RETURN [x IN nodes(p) | properties(x)] AS nodes,
       [e IN relationships(p) | {{source: startNode(e).urn, target: endNode(e).urn,
                                  rel: type(e), props: properties(e)}}] AS edges
"""
_DROP_BATCH = (
    "MATCH (n) WHERE n:Node OR n:Checkpoint WITH n LIMIT 10000 DETACH DELETE n "
    "RETURN count(*) AS deleted"
)


class Neo4jGraphStore:
    """`GraphStore` on a Neo4j 5 server; the driver is created on first use.

    The driver is thread-safe and pools connections; writes go through managed transactions
    (`session.execute_write`), which retry transient failures, so every write is idempotent.
    """

    def __init__(self, uri: str, user: str, password: str, database: str | None = None) -> None:
        self.uri = uri
        self.database = database
        self._auth = (user, password)
        self._driver: Driver | None = None
        self._lock = threading.Lock()
        self._ensured = False

    def __repr__(self) -> str:  # never the password
        return f"Neo4jGraphStore(uri={self.uri!r}, database={self.database!r})"

    @property
    def driver(self) -> Driver:
        with self._lock:
            if self._driver is None:
                self._driver = GraphDatabase.driver(self.uri, auth=self._auth)
                log.info("connecting to Neo4j at %s", self.uri)
            return self._driver

    def _read(self, query: str, **params: Any) -> list[dict[str, Any]]:
        records, _summary, _keys = self.driver.execute_query(
            query, parameters_=params, routing_=RoutingControl.READ, database_=self.database
        )
        return [record.data() for record in records]

    def _write(self, query: str, **params: Any) -> list[dict[str, Any]]:
        records, _summary, _keys = self.driver.execute_query(
            query, parameters_=params, routing_=RoutingControl.WRITE, database_=self.database
        )
        return [record.data() for record in records]

    def ensure(self) -> None:
        for statement in _SCHEMA:
            self._write(statement)
        self._ensured = True

    def _ensure_once(self) -> None:
        if not self._ensured:
            self.ensure()

    def apply_file(
        self,
        tenant_id: str,
        project_id: str,
        file_path: str,
        nodes: Sequence[LineageNode],
        edges: Sequence[LineageEdge],
        retracted_edge_ids: Sequence[str],
    ) -> None:
        self._ensure_once()
        retracted = [edge_key(tenant_id, eid) for eid in retracted_edge_ids]
        node_rows = [node_row(tenant_id, n) for n in merge_batch(nodes)]
        missing_rows = [node_row(tenant_id, n) for n in missing_endpoints(nodes, edges)]
        edge_rows: dict[str, list[dict[str, Any]]] = {}
        for edge in latest_edges(edges):
            edge_rows.setdefault(str(edge.rel), []).append(_edge_row(tenant_id, edge))
        with self.driver.session(database=self.database) as session:
            session.execute_write(_apply, retracted, node_rows, missing_rows, edge_rows)

    def remove_file(self, tenant_id: str, project_id: str, file_path: str) -> None:
        params = {"tenant": tenant_id, "project": project_id, "file": file_path}
        with self.driver.session(database=self.database) as session:
            session.execute_write(_remove_file, params)

    def find_nodes(
        self, tenant_id: str, project_id: str | None, names: Sequence[str]
    ) -> dict[str, list[LineageNode]]:
        if not names:
            return {}
        rows = self._read(
            _FIND,
            tenant=tenant_id,
            project=project_id,
            lnames=sorted({name.lower() for name in names}),
            keys=sorted({node_key(tenant_id, name) for name in names}),
        )
        return group_by_name(names, (_node(row["props"]) for row in rows))

    def get_node(self, tenant_id: str, urn: str) -> LineageNode | None:
        rows = self._read(
            "MATCH (n:Node {key: $key}) RETURN properties(n) AS props",
            key=node_key(tenant_id, urn),
        )
        return _node(rows[0]["props"]) if rows else None

    def traverse(
        self,
        tenant_id: str,
        urn: str,
        direction: Direction,
        hops: int,
        rels: Sequence[Rel] = DEFAULT_RELS,
        include_llm: bool = False,
    ) -> Subgraph:
        wanted = check_traversal(direction, hops, rels)
        pattern = f"[:{'|'.join(wanted)}*1..{int(hops)}]"
        arrow = f"-{pattern}->" if direction == "upstream" else f"<-{pattern}-"
        rows = self._read(
            _WALK.format(arrow=arrow), key=node_key(tenant_id, urn), include_llm=include_llm
        )
        walks = (
            ([_node(n) for n in row["nodes"]], [_edge_of(e) for e in row["edges"]]) for row in rows
        )
        return from_paths(urn, walks)

    def edges_of_file(self, tenant_id: str, project_id: str, file_path: str) -> list[LineageEdge]:
        rows = self._read(_FILE_EDGES, tenant=tenant_id, project=project_id, file=file_path)
        return sorted((_edge_of(row) for row in rows), key=edge_sort_key)

    def counts(self) -> dict[str, int]:
        nodes = self._read("MATCH (n:Node) RETURN count(n) AS c")[0]["c"]
        edges = self._read("MATCH (:Node)-[e]->(:Node) RETURN count(e) AS c")[0]["c"]
        return {"nodes": int(nodes), "edges": int(edges)}

    def most_connected_names(self, limit: int) -> list[str]:
        rows = self._read(
            "MATCH (n:Node)-[e]-(:Node) RETURN n.name AS name, count(e) AS degree "
            "ORDER BY degree DESC, name LIMIT $limit",
            limit=int(limit),
        )
        return [str(row["name"]) for row in rows]

    def dump(self) -> tuple[list[LineageNode], list[LineageEdge]]:
        node_rows = self._read("MATCH (n:Node) RETURN properties(n) AS props")
        edge_rows = self._read("MATCH (s:Node)-[e]->(t:Node) " + _EDGE_RETURN)
        nodes = sorted((_node(row["props"]) for row in node_rows), key=node_sort_key)
        edges = sorted((_edge_of(row) for row in edge_rows), key=edge_sort_key)
        return nodes, edges

    def checkpoint(self, name: str) -> int:
        rows = self._read(
            "MATCH (c:Checkpoint {name: $name}) RETURN c.position AS position", name=name
        )
        return int(rows[0]["position"]) if rows else 0

    def save_checkpoint(self, name: str, position: int) -> None:
        self._ensure_once()
        self._write(
            "MERGE (c:Checkpoint {name: $name}) SET c.position = $position",
            name=name,
            position=int(position),
        )

    def drop(self) -> None:
        """Delete in batches of 10,000 nodes so a large graph never needs one huge transaction."""
        while self._write(_DROP_BATCH)[0]["deleted"]:
            pass

    def close(self) -> None:
        with self._lock:
            if self._driver is not None:
                self._driver.close()
                self._driver = None


def _apply(
    tx: ManagedTransaction,
    retracted: list[str],
    node_rows: list[dict[str, Any]],
    missing_rows: list[dict[str, Any]],
    edge_rows: dict[str, list[dict[str, Any]]],
) -> None:
    if retracted:
        for rel in _RELS:
            tx.run(_RETRACT[rel], keys=retracted).consume()
    if node_rows:
        tx.run(_UPSERT_NODES, rows=node_rows).consume()
    if missing_rows:
        tx.run(_CREATE_MISSING_NODES, rows=missing_rows).consume()
    for rel, rows in sorted(edge_rows.items()):
        tx.run(_UPSERT_EDGES[rel], rows=rows).consume()


def _remove_file(tx: ManagedTransaction, params: dict[str, Any]) -> None:
    for rel in _RELS:
        tx.run(_DELETE_FILE_EDGES[rel], params).consume()
    tx.run(_DELETE_ORPHANS, params).consume()


def _edge_row(tenant_id: str, edge: LineageEdge) -> dict[str, Any]:
    status = edge.properties.get("status")
    props = {
        "key": edge_key(tenant_id, edge.edge_id),
        "edge_id": edge.edge_id,
        "tenant_id": tenant_id,
        "project_id": edge.project_id,
        "file_path": edge.file_path,
        "line_start": int(edge.line_start),
        "line_end": int(edge.line_end),
        "provenance": edge.provenance,
        "dialect": edge.dialect,
        "confidence": float(edge.confidence),
        "conditional": bool(edge.conditional),
        "via": edge.via,
        "status": None if status is None else str(status),
        "properties": dumps(edge.properties),
    }
    return {
        "key": props["key"],
        "source_key": node_key(tenant_id, edge.source),
        "target_key": node_key(tenant_id, edge.target),
        "props": {k: v for k, v in props.items() if v is not None},
    }


def _node(props: dict[str, Any]) -> LineageNode:
    return LineageNode(
        urn=props["urn"],
        kind=NodeKind(props["kind"]),
        name=props["name"],
        project_id=props["project_id"],
        path=props.get("path"),
        properties=json.loads(props.get("properties") or "{}"),
    )


def _edge_of(row: dict[str, Any]) -> LineageEdge:
    """An edge from `{source, target, rel, props}` (a relationship's properties)."""
    props = row["props"]
    return LineageEdge(
        source=row["source"],
        target=row["target"],
        rel=Rel(row["rel"]),
        project_id=props["project_id"],
        file_path=props["file_path"],
        line_start=int(props["line_start"]),
        line_end=int(props["line_end"]),
        provenance=props.get("provenance", "parser"),
        dialect=props.get("dialect"),
        confidence=float(props.get("confidence", 1.0)),
        conditional=bool(props.get("conditional", False)),
        via=props.get("via"),
        properties=json.loads(props.get("properties") or "{}"),
    )
