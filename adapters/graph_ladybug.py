"""The lineage graph in Ladybug, the embedded Cypher graph database (Kùzu's continuation).

Schema (typed tables, created by `ensure()` and on first use):

- ``Node``: ``key`` (``tenant_id|urn``, the primary key), ``urn``, ``tenant_id``, ``project_id``,
  ``kind``, ``name``, ``lname`` (name lower-cased), ``lseg`` (short name lower-cased, see
  `last_segment`), ``path``, ``properties`` (JSON).
- ``Edge`` (``FROM Node TO Node``): ``key`` (``tenant_id|edge_id``), ``edge_id``, ``tenant_id``,
  ``project_id``, ``rel``, ``file_path``, ``line_start``, ``line_end``, ``provenance``,
  ``dialect``, ``confidence``, ``conditional``, ``via``, ``status`` (``properties.status``, for
  the LLM-edge filter), ``properties`` (JSON).
- ``Checkpoint``: ``name`` (primary key), ``position``.

Traversal is breadth-first with one query per hop (the frontier's adjacency lists, filtered by
relation and provenance), so each edge is read at most once whatever the graph's shape; a
variable-length pattern enumerates every walk, which grows with fan-out to the power of the
number of hops. On 5,000 nodes / 10,000 edges a 3-hop traversal takes about 3 ms.

The database is one file locked by the process that opens it: one process at a time.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ladybug

from adapters.graph_rows import dumps, node_row
from domain.graph import LineageEdge, LineageNode, NodeKind, Rel, Subgraph
from domain.graph_port import (
    DEFAULT_RELS,
    Direction,
    Step,
    breadth_first,
    check_traversal,
    edge_key,
    edge_sort_key,
    group_by_name,
    latest_edges,
    merge_batch,
    missing_endpoints,
    node_key,
    node_sort_key,
)

log = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE NODE TABLE IF NOT EXISTS Node(key STRING, urn STRING, tenant_id STRING, "
    "project_id STRING, kind STRING, name STRING, lname STRING, lseg STRING, path STRING, "
    "properties STRING, PRIMARY KEY (key))",
    "CREATE REL TABLE IF NOT EXISTS Edge(FROM Node TO Node, key STRING, edge_id STRING, "
    "tenant_id STRING, project_id STRING, rel STRING, file_path STRING, line_start INT64, "
    "line_end INT64, provenance STRING, dialect STRING, confidence DOUBLE, conditional BOOLEAN, "
    "via STRING, status STRING, properties STRING)",
    "CREATE NODE TABLE IF NOT EXISTS Checkpoint(name STRING, position INT64, PRIMARY KEY (name))",
)

_NODE_FIELDS = "{0}.urn, {0}.kind, {0}.name, {0}.project_id, {0}.path, {0}.properties"
_EDGE_FIELDS = (
    "e.rel, e.project_id, e.file_path, e.line_start, e.line_end, e.provenance, e.dialect, "
    "e.confidence, e.conditional, e.via, e.properties"
)
_VISIBLE = "e.rel IN $rels AND (e.provenance <> 'llm' OR $include_llm OR e.status = 'accepted')"

_RETRACT = "MATCH ()-[e:Edge]->() WHERE e.key IN $keys DELETE e"
_UPSERT_NODES = """
UNWIND $rows AS row
MERGE (n:Node {key: row.key})
ON CREATE SET n.urn = row.urn, n.tenant_id = row.tenant_id, n.project_id = row.project_id,
  n.kind = row.kind, n.name = row.name, n.lname = row.lname, n.lseg = row.lseg,
  n.path = row.path, n.properties = row.properties
ON MATCH SET n.kind = CASE WHEN row.kind = 'table' THEN n.kind ELSE row.kind END,
  n.project_id = row.project_id, n.name = row.name, n.lname = row.lname, n.lseg = row.lseg,
  n.path = coalesce(row.path, n.path),
  n.properties = CASE WHEN row.properties = '{}' THEN n.properties ELSE row.properties END
"""
_CREATE_MISSING_NODES = """
UNWIND $rows AS row
MERGE (n:Node {key: row.key})
ON CREATE SET n.urn = row.urn, n.tenant_id = row.tenant_id, n.project_id = row.project_id,
  n.kind = row.kind, n.name = row.name, n.lname = row.lname, n.lseg = row.lseg,
  n.path = row.path, n.properties = row.properties
"""
_UPSERT_EDGES = """
UNWIND $rows AS row
MATCH (s:Node {key: row.source_key})
MATCH (t:Node {key: row.target_key})
MERGE (s)-[e:Edge {key: row.key}]->(t)
SET e.edge_id = row.edge_id, e.tenant_id = row.tenant_id, e.project_id = row.project_id,
  e.rel = row.rel, e.file_path = row.file_path, e.line_start = row.line_start,
  e.line_end = row.line_end, e.provenance = row.provenance, e.dialect = row.dialect,
  e.confidence = row.confidence, e.conditional = row.conditional, e.via = row.via,
  e.status = row.status, e.properties = row.properties
"""
_FILE_EDGES = (
    "MATCH (s:Node)-[e:Edge]->(t:Node) WHERE e.tenant_id = $tenant AND e.project_id = $project "
    "AND e.file_path = $file"
)
_DELETE_ORPHANS = """
MATCH (n:Node)
WHERE n.tenant_id = $tenant AND n.project_id = $project
  AND (n.path = $file OR (n.kind = 'file' AND n.name = $file))
  AND NOT EXISTS { MATCH (n)-[:Edge]-() }
DELETE n
"""
_FIND = (
    "MATCH (n:Node) WHERE n.tenant_id = $tenant AND {project}"
    "(n.lname IN $lnames OR n.lseg IN $lnames OR n.key IN $keys) RETURN " + _NODE_FIELDS.format("n")
)
_STEP = {  # `a.key IN $keys` is a hundred times faster than `UNWIND $keys ... {key: k}` here
    direction: f"MATCH (a:Node){arrow}(b:Node) WHERE a.key IN $keys AND {_VISIBLE} "
    f"RETURN a.urn, b.urn, {_EDGE_FIELDS}, {_NODE_FIELDS.format('b')}"
    for direction, arrow in (("upstream", "-[e:Edge]->"), ("downstream", "<-[e:Edge]-"))
}


class LadybugGraphStore:
    """`GraphStore` on an embedded Ladybug database file, opened on first use.

    Ladybug allows one writer and its connection is not safe for concurrent use, so every
    call holds one lock.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._db: ladybug.Database | None = None
        self._conn: ladybug.Connection | None = None

    @property
    def connection(self) -> ladybug.Connection:
        """The connection, opening the database and creating the schema the first time."""
        with self._lock:
            if self._conn is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = self._open_database()
                conn = ladybug.Connection(db)
                try:
                    for statement in _SCHEMA:
                        _execute(conn, statement)
                except BaseException:
                    conn.close()
                    db.close()
                    raise
                self._db, self._conn = db, conn
                log.info("opened lineage graph %s", self.path)
            return self._conn

    def _open_database(self) -> ladybug.Database:
        """Open the database. One that cannot be opened after a crash (a write-ahead log torn
        by SIGKILL mid-write) is repaired the read-model way: the log is set aside (back to the
        last checkpoint), else the whole file (empty, checkpoint 0), and the catch-up re-applies
        the events from the store."""
        try:
            return ladybug.Database(str(self.path))
        except RuntimeError as exc:
            wal = self.path.with_name(self.path.name + ".wal")
            if not wal.exists() or "lock" in str(exc).lower():  # in use elsewhere: not ours
                raise
            self._set_aside(wal, exc, "goes back to its last checkpoint")
        try:
            return ladybug.Database(str(self.path))
        except RuntimeError as exc:
            self._set_aside(self.path, exc, "is rebuilt from the event store")
            return ladybug.Database(str(self.path))

    def _set_aside(self, path: Path, error: Exception, outcome: str) -> None:
        aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
        path.rename(aside)
        log.error(
            "lineage graph %s could not be opened (%s), probably after a crash mid-write: "
            "%s moved to %s; the graph %s and catches up from the events.",
            self.path,
            error,
            path.name,
            aside,
            outcome,
        )

    def _run(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Execute on the open connection; the caller holds the lock."""
        assert self._conn is not None
        return _execute(self._conn, query, params)

    def _query(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        with self._lock:
            _ = self.connection
            return self._run(query, params)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._lock:
            _ = self.connection
            self._run("BEGIN TRANSACTION")
            try:
                yield
            except BaseException:
                self._rollback()
                raise
            self._run("COMMIT")

    def _rollback(self) -> None:
        """Roll back, unless the failed statement already did (Ladybug aborts on error)."""
        try:
            self._run("ROLLBACK")
        except RuntimeError as exc:
            log.debug("no transaction to roll back: %s", exc)

    def ensure(self) -> None:
        _ = self.connection

    def apply_file(
        self,
        tenant_id: str,
        project_id: str,
        file_path: str,
        nodes: Sequence[LineageNode],
        edges: Sequence[LineageEdge],
        retracted_edge_ids: Sequence[str],
    ) -> None:
        node_rows = [node_row(tenant_id, n) for n in merge_batch(nodes)]
        missing_rows = [node_row(tenant_id, n) for n in missing_endpoints(nodes, edges)]
        edge_rows = [_edge_row(tenant_id, e) for e in latest_edges(edges)]
        retracted = [edge_key(tenant_id, eid) for eid in retracted_edge_ids]
        with self._transaction():
            if retracted:
                self._run(_RETRACT, {"keys": retracted})
            if node_rows:
                self._run(_UPSERT_NODES, {"rows": node_rows})
            if missing_rows:
                self._run(_CREATE_MISSING_NODES, {"rows": missing_rows})
            if edge_rows:
                self._run(_UPSERT_EDGES, {"rows": edge_rows})

    def remove_file(self, tenant_id: str, project_id: str, file_path: str) -> None:
        params = {"tenant": tenant_id, "project": project_id, "file": file_path}
        with self._transaction():
            self._run(_FILE_EDGES + " DELETE e", params)
            self._run(_DELETE_ORPHANS, params)

    def find_nodes(
        self, tenant_id: str, project_id: str | None, names: Sequence[str]
    ) -> dict[str, list[LineageNode]]:
        if not names:
            return {}
        params: dict[str, Any] = {
            "tenant": tenant_id,
            "lnames": sorted({name.lower() for name in names}),
            "keys": sorted({node_key(tenant_id, name) for name in names}),
        }
        project = ""
        if project_id is not None:
            project, params["project"] = "n.project_id = $project AND ", project_id
        rows = self._query(_FIND.format(project=project), params)
        return group_by_name(names, (_node(row) for row in rows))

    def get_node(self, tenant_id: str, urn: str) -> LineageNode | None:
        rows = self._query(
            "MATCH (n:Node {key: $key}) RETURN " + _NODE_FIELDS.format("n"),
            {"key": node_key(tenant_id, urn)},
        )
        return _node(rows[0]) if rows else None

    def traverse(
        self,
        tenant_id: str,
        urn: str,
        direction: Direction,
        hops: int,
        rels: Sequence[Rel] = DEFAULT_RELS,
        include_llm: bool = False,
    ) -> Subgraph:
        wanted = list(check_traversal(direction, hops, rels))
        query = _STEP[direction]
        upstream = direction == "upstream"

        def expand(frontier: Sequence[str]) -> Iterator[Step]:
            keys = [node_key(tenant_id, u) for u in frontier]
            params = {"keys": keys, "rels": wanted, "include_llm": include_llm}
            for row in self._run(query, params):
                origin, other = row[0], row[1]
                source, target = (origin, other) if upstream else (other, origin)
                yield Step(origin, _edge(source, target, row[2:13]), _node(row[13:]))

        with self._lock:
            _ = self.connection
            if self.get_node(tenant_id, urn) is None:
                return Subgraph(start=urn)
            return breadth_first(urn, hops, expand)

    def edges_of_file(self, tenant_id: str, project_id: str, file_path: str) -> list[LineageEdge]:
        rows = self._query(
            _FILE_EDGES + " RETURN s.urn, t.urn, " + _EDGE_FIELDS,
            {"tenant": tenant_id, "project": project_id, "file": file_path},
        )
        return sorted((_edge(row[0], row[1], row[2:]) for row in rows), key=edge_sort_key)

    def counts(self) -> dict[str, int]:
        with self._lock:
            nodes = self._query("MATCH (n:Node) RETURN count(n)")[0][0]
            edges = self._query("MATCH ()-[e:Edge]->() RETURN count(e)")[0][0]
        return {"nodes": int(nodes), "edges": int(edges)}

    def most_connected_names(self, limit: int) -> list[str]:
        rows = self._query(
            "MATCH (n:Node)-[e:Edge]-(:Node) RETURN n.name AS name, count(e) AS degree "
            "ORDER BY degree DESC, name LIMIT $limit",
            {"limit": int(limit)},
        )
        return [str(row[0]) for row in rows]

    def dump(self) -> tuple[list[LineageNode], list[LineageEdge]]:
        with self._lock:
            node_rows = self._query("MATCH (n:Node) RETURN " + _NODE_FIELDS.format("n"))
            edge_rows = self._query(
                "MATCH (s:Node)-[e:Edge]->(t:Node) RETURN s.urn, t.urn, " + _EDGE_FIELDS
            )
        nodes = sorted((_node(row) for row in node_rows), key=node_sort_key)
        edges = sorted((_edge(row[0], row[1], row[2:]) for row in edge_rows), key=edge_sort_key)
        return nodes, edges

    def checkpoint(self, name: str) -> int:
        rows = self._query("MATCH (c:Checkpoint {name: $name}) RETURN c.position", {"name": name})
        return int(rows[0][0]) if rows else 0

    def save_checkpoint(self, name: str, position: int) -> None:
        self._query(
            "MERGE (c:Checkpoint {name: $name}) SET c.position = $position",
            {"name": name, "position": int(position)},
        )

    def drop(self) -> None:
        with self._transaction():
            self._run("MATCH (n:Node) DETACH DELETE n")
            self._run("MATCH (c:Checkpoint) DELETE c")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._db is not None:
                self._db.close()
                self._db = None


def _execute(
    conn: ladybug.Connection, query: str, params: dict[str, Any] | None = None
) -> list[list[Any]]:
    result = conn.execute(query, params or {})
    rows: list[list[Any]] = []
    for each in result if isinstance(result, list) else [result]:
        rows.extend(list(row) for row in each.get_all())
        each.close()
    return rows


def _edge_row(tenant_id: str, edge: LineageEdge) -> dict[str, Any]:
    status = edge.properties.get("status")
    return {
        "key": edge_key(tenant_id, edge.edge_id),
        "source_key": node_key(tenant_id, edge.source),
        "target_key": node_key(tenant_id, edge.target),
        "edge_id": edge.edge_id,
        "tenant_id": tenant_id,
        "project_id": edge.project_id,
        "rel": str(edge.rel),
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


def _node(row: Sequence[Any]) -> LineageNode:
    urn, kind, name, project_id, path, properties = row
    return LineageNode(urn, NodeKind(kind), name, project_id, path, json.loads(properties or "{}"))


def _edge(source: str, target: str, row: Sequence[Any]) -> LineageEdge:
    (rel, project_id, file_path, line_start, line_end, provenance, dialect) = row[:7]
    confidence, conditional, via, properties = row[7:11]
    return LineageEdge(
        source=source,
        target=target,
        rel=Rel(rel),
        project_id=project_id,
        file_path=file_path,
        line_start=int(line_start),
        line_end=int(line_end),
        provenance=provenance,
        dialect=dialect,
        confidence=float(confidence),
        conditional=bool(conditional),
        via=via,
        properties=json.loads(properties or "{}"),
    )
