"""The `kg` read model in SQLite (the standard library's): one file per process, like the
model configurations' DuckDB, or `:memory:` in tests.

Tables: `kg_edges` (every edge as it stands: parser edges `parsed`/`retracted`, LLM edges
`proposed`/`accepted`/`rejected`/`retracted` with model, confidence, verification),
`kg_edge_history` (one row per edge event: action, actor, time, details), `kg_runs`,
`kg_files` and `checkpoints`. A batch and its checkpoint commit together. One connection,
guarded by a lock: the projection writes from its runner's thread, the API reads from others.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from domain.kg.ports import KGOperation

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS kg_edges (
      tenant_id TEXT NOT NULL, edge_id TEXT NOT NULL, project_id TEXT, file_path TEXT,
      source TEXT, target TEXT, rel TEXT, provenance TEXT, status TEXT, verification TEXT,
      verification_detail TEXT, model TEXT, provider TEXT, confidence REAL, reasoning TEXT,
      run_id TEXT, content_hash TEXT, line_start INTEGER, line_end INTEGER,
      proposed_at TEXT, updated_at TEXT, decided_by TEXT, position INTEGER,
      PRIMARY KEY (tenant_id, edge_id))""",
    "CREATE INDEX IF NOT EXISTS kg_edges_file ON kg_edges (tenant_id, project_id, file_path)",
    """CREATE TABLE IF NOT EXISTS kg_edge_history (
      id INTEGER PRIMARY KEY AUTOINCREMENT, position INTEGER NOT NULL, tenant_id TEXT NOT NULL,
      edge_id TEXT NOT NULL, action TEXT NOT NULL, event_type TEXT NOT NULL, actor TEXT,
      occurred_at TEXT, project_id TEXT, file_path TEXT, details TEXT)""",
    "CREATE INDEX IF NOT EXISTS kg_history_edge ON kg_edge_history (tenant_id, edge_id)",
    """CREATE TABLE IF NOT EXISTS kg_runs (
      run_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, project_id TEXT, run_key TEXT,
      trigger TEXT, trigger_position INTEGER, scope TEXT, actor TEXT, reason TEXT,
      status TEXT, requested_at TEXT, requested_position INTEGER, completed_at TEXT,
      files TEXT NOT NULL DEFAULT '[]', totals TEXT)""",
    """CREATE TABLE IF NOT EXISTS kg_files (
      tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, path TEXT NOT NULL,
      present INTEGER NOT NULL, lineage_position INTEGER NOT NULL,
      PRIMARY KEY (tenant_id, project_id, path))""",
    "CREATE TABLE IF NOT EXISTS checkpoints (name TEXT PRIMARY KEY, position INTEGER NOT NULL)",
)
_TABLES = ("kg_edges", "kg_edge_history", "kg_runs", "kg_files", "checkpoints")
_EDGE_COLUMNS = (
    "edge_id, project_id, file_path, source, target, rel, provenance, status, verification, "
    "verification_detail, model, provider, confidence, reasoning, run_id, content_hash, "
    "line_start, line_end, proposed_at, updated_at, decided_by, position"
)
_CLOSED = ("retracted", "rejected")


class SqliteKGStore:
    """`KGStore` on a SQLite file (or `:memory:`), opened on first use."""

    def __init__(self, path: Path | str = ":memory:") -> None:
        self.path = str(path)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            for statement in _SCHEMA:
                conn.execute(statement)
            self._conn = conn
        return self._conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # -- lifecycle ------------------------------------------------------------------------
    def ensure(self) -> None:
        with self._lock:
            self._connection()

    def drop(self) -> None:
        with self._transaction() as conn:
            for table in _TABLES:
                conn.execute(f"DELETE FROM {table}")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- projection side ------------------------------------------------------------------
    def checkpoint(self, name: str) -> int:
        rows = self._select("SELECT position FROM checkpoints WHERE name = ?", [name])
        return int(rows[0]["position"]) if rows else 0

    def apply(self, operations: Sequence[KGOperation], name: str, position: int) -> None:
        with self._transaction() as conn:
            for kind, data in operations:
                _APPLY[kind](conn, data)
            conn.execute(
                "INSERT INTO checkpoints (name, position) VALUES (?, ?) "
                "ON CONFLICT (name) DO UPDATE SET position = excluded.position",
                [name, position],
            )

    # -- queries --------------------------------------------------------------------------
    def llm_edges(
        self,
        tenant_id: str,
        project_id: str | None = None,
        status: str | None = None,
        verification: str | None = None,
        file_path: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        clauses, args = ["tenant_id = ?", "provenance = 'llm'"], [tenant_id]
        for column, value in (
            ("project_id", project_id),
            ("status", status),
            ("verification", verification),
            ("file_path", file_path),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        rows = self._select(
            f"SELECT {_EDGE_COLUMNS} FROM kg_edges WHERE {' AND '.join(clauses)} "
            "ORDER BY position DESC, edge_id LIMIT ? OFFSET ?",
            [*args, int(limit), int(offset)],
        )
        return [dict(row) for row in rows]

    def edge(self, tenant_id: str, edge_id: str) -> dict[str, Any] | None:
        rows = self._select(
            f"SELECT {_EDGE_COLUMNS} FROM kg_edges WHERE tenant_id = ? AND edge_id = ?",
            [tenant_id, edge_id],
        )
        return dict(rows[0]) if rows else None

    def history(self, tenant_id: str, edge_id: str) -> list[dict[str, Any]]:
        rows = self._select(
            "SELECT position, action, event_type, actor, occurred_at, project_id, file_path, "
            "details FROM kg_edge_history WHERE tenant_id = ? AND edge_id = ? "
            "ORDER BY position, id",
            [tenant_id, edge_id],
        )
        return [{**dict(row), "details": json.loads(row["details"] or "{}")} for row in rows]

    def runs(
        self,
        tenant_id: str,
        project_id: str | None = None,
        after_position: int = 0,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        clauses, args = ["tenant_id = ?", "requested_position > ?"], [tenant_id, after_position]
        if project_id is not None:
            clauses.append("project_id = ?")
            args.append(project_id)
        rows = self._select(
            f"SELECT * FROM kg_runs WHERE {' AND '.join(clauses)} "
            "ORDER BY requested_position DESC LIMIT ?",
            [*args, int(limit)],
        )
        return [_run_row(row) for row in rows]

    def run(self, tenant_id: str, run_id: str) -> dict[str, Any] | None:
        rows = self._select(
            "SELECT * FROM kg_runs WHERE tenant_id = ? AND run_id = ?", [tenant_id, run_id]
        )
        return _run_row(rows[0]) if rows else None

    def files(self, tenant_id: str, project_id: str) -> list[dict[str, Any]]:
        rows = self._select(
            "SELECT path, lineage_position FROM kg_files WHERE tenant_id = ? AND project_id = ? "
            "AND present = 1 ORDER BY path",
            [tenant_id, project_id],
        )
        return [dict(row) for row in rows]

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row (history without its autoincrement id), sorted."""
        columns = {
            "kg_edges": "*",
            "kg_edge_history": "position, tenant_id, edge_id, action, event_type, actor, "
            "occurred_at, project_id, file_path, details",
            "kg_runs": "*",
            "kg_files": "*",
        }
        with self._lock:
            return {
                table: sorted(
                    tuple(row) for row in self._connection().execute(f"SELECT {cols} FROM {table}")
                )
                for table, cols in columns.items()
            }

    def _select(self, sql: str, args: Sequence[Any]) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._connection().execute(sql, list(args)).fetchall())


# -- operations -------------------------------------------------------------------------------
def _history(
    conn: sqlite3.Connection,
    d: dict[str, Any],
    edge_id: str,
    action: str,
    event_type: str,
    actor: str,
    file_path: str,
    details: dict[str, Any],
) -> None:
    conn.execute(
        "INSERT INTO kg_edge_history (position, tenant_id, edge_id, action, event_type, actor, "
        "occurred_at, project_id, file_path, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            d["position"],
            d["tenant_id"],
            edge_id,
            action,
            event_type,
            actor,
            d["occurred_at"],
            d["project_id"],
            file_path,
            json.dumps(details, sort_keys=True, default=str),
        ],
    )


def _file(conn: sqlite3.Connection, d: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO kg_files (tenant_id, project_id, path, present, lineage_position) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, project_id, path) DO UPDATE SET "
        "present = excluded.present, lineage_position = excluded.lineage_position",
        [d["tenant_id"], d["project_id"], d["path"], int(d["present"]), d["position"]],
    )


def _parsed(conn: sqlite3.Connection, d: dict[str, Any]) -> None:
    for e in d["edges"]:
        conn.execute(
            "INSERT INTO kg_edges (tenant_id, edge_id, project_id, file_path, source, target, "
            "rel, provenance, status, confidence, line_start, line_end, proposed_at, "
            "updated_at, position) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'parsed', ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, edge_id) DO UPDATE SET status = 'parsed', "
            "confidence = excluded.confidence, line_start = excluded.line_start, "
            "line_end = excluded.line_end, updated_at = excluded.updated_at",
            [
                d["tenant_id"],
                e["edge_id"],
                e["project_id"],
                e["file_path"],
                e["source"],
                e["target"],
                e["rel"],
                e.get("provenance", "parser"),
                e.get("confidence", 1.0),
                e["line_start"],
                e["line_end"],
                d["occurred_at"],
                d["occurred_at"],
                d["position"],
            ],
        )
        details = {
            "rel": e["rel"],
            "source": e["source"],
            "target": e["target"],
            "lines": [e["line_start"], e["line_end"]],
            "confidence": e.get("confidence", 1.0),
            "provenance": e.get("provenance", "parser"),
        }
        _history(
            conn, d, e["edge_id"], "parsed", "LineageExtracted", "parser", e["file_path"], details
        )


def _retract_edges(conn: sqlite3.Connection, d: dict[str, Any]) -> None:
    for edge_id in d["edge_ids"]:
        conn.execute(
            "UPDATE kg_edges SET status = 'retracted', updated_at = ? "
            "WHERE tenant_id = ? AND edge_id = ?",
            [d["occurred_at"], d["tenant_id"], edge_id],
        )
        _history(
            conn,
            d,
            edge_id,
            "retracted",
            "LineageEdgesRetracted",
            d["actor"],
            d["path"],
            {"reason": d["reason"]},
        )


def _retract_file(conn: sqlite3.Connection, d: dict[str, Any]) -> None:
    rows = conn.execute(
        "SELECT edge_id, provenance FROM kg_edges WHERE tenant_id = ? AND project_id = ? "
        "AND file_path = ? AND status NOT IN (?, ?) ORDER BY edge_id",
        [d["tenant_id"], d["project_id"], d["path"], *_CLOSED],
    ).fetchall()
    for row in rows:
        conn.execute(
            "UPDATE kg_edges SET status = 'retracted', updated_at = ? "
            "WHERE tenant_id = ? AND edge_id = ?",
            [d["occurred_at"], d["tenant_id"], row["edge_id"]],
        )
        details = {"reason": d["reason"], "provenance": row["provenance"]}
        _history(
            conn, d, row["edge_id"], "retracted", "FileDeleted", d["actor"], d["path"], details
        )


def _llm_edge(conn: sqlite3.Connection, d: dict[str, Any]) -> None:
    action, details, edge = d["action"], d["details"], d["edge"]
    if action == "proposed":
        conn.execute(
            "INSERT INTO kg_edges (tenant_id, edge_id, project_id, file_path, source, target, "
            "rel, provenance, status, model, provider, confidence, reasoning, run_id, "
            "content_hash, line_start, line_end, proposed_at, updated_at, position) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'llm', 'proposed', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, edge_id) DO UPDATE SET status = 'proposed', "
            "verification = NULL, verification_detail = NULL, decided_by = NULL, "
            "model = excluded.model, provider = excluded.provider, "
            "confidence = excluded.confidence, reasoning = excluded.reasoning, "
            "run_id = excluded.run_id, content_hash = excluded.content_hash, "
            "line_start = excluded.line_start, line_end = excluded.line_end, "
            "proposed_at = excluded.proposed_at, updated_at = excluded.updated_at, "
            "position = excluded.position",
            [
                d["tenant_id"],
                d["edge_id"],
                d["project_id"],
                d["file_path"],
                edge["source"],
                edge["target"],
                edge["rel"],
                details["model"],
                details["provider"],
                details["confidence"],
                details["reasoning"],
                details["run_id"],
                details["content_hash"],
                edge["line_start"],
                edge["line_end"],
                d["occurred_at"],
                d["occurred_at"],
                d["position"],
            ],
        )
    elif action == "verified":
        conn.execute(
            "UPDATE kg_edges SET verification = ?, verification_detail = ?, updated_at = ? "
            "WHERE tenant_id = ? AND edge_id = ?",
            [
                details["verification"],
                details["detail"],
                d["occurred_at"],
                d["tenant_id"],
                d["edge_id"],
            ],
        )
    else:
        decided_by = d["actor"] if action in ("accepted", "rejected") else None
        conn.execute(
            "UPDATE kg_edges SET status = ?, updated_at = ?, "
            "decided_by = coalesce(?, decided_by) WHERE tenant_id = ? AND edge_id = ?",
            [action, d["occurred_at"], decided_by, d["tenant_id"], d["edge_id"]],
        )
    _history(conn, d, d["edge_id"], action, d["event_type"], d["actor"], d["file_path"], details)


def _run_requested(conn: sqlite3.Connection, d: dict[str, Any]) -> None:
    p = d["payload"]
    conn.execute(
        "INSERT OR REPLACE INTO kg_runs (run_id, tenant_id, project_id, run_key, trigger, "
        "trigger_position, scope, actor, reason, status, requested_at, requested_position) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'requested', ?, ?)",
        [
            d["run_id"],
            d["tenant_id"],
            d["project_id"],
            p["run_key"],
            p["trigger"],
            p["trigger_position"],
            json.dumps(p["scope"]),
            p["actor"],
            p["reason"],
            d["occurred_at"],
            d["position"],
        ],
    )


def _run_file(conn: sqlite3.Connection, d: dict[str, Any]) -> None:
    row = conn.execute("SELECT files FROM kg_runs WHERE run_id = ?", [d["run_id"]]).fetchone()
    files = json.loads(row["files"]) if row else []
    files.append({k: v for k, v in d["payload"].items() if k not in ("tenant_id", "project_id")})
    conn.execute("UPDATE kg_runs SET files = ? WHERE run_id = ?", [json.dumps(files), d["run_id"]])


def _run_completed(conn: sqlite3.Connection, d: dict[str, Any]) -> None:
    totals = {k: v for k, v in d["payload"].items() if k not in ("tenant_id", "project_id")}
    conn.execute(
        "UPDATE kg_runs SET status = ?, completed_at = ?, totals = ? WHERE run_id = ?",
        [totals["outcome"], d["occurred_at"], json.dumps(totals), d["run_id"]],
    )


def _run_row(row: sqlite3.Row) -> dict[str, Any]:
    data = dict(row)
    data["scope"] = json.loads(data["scope"] or "[]")
    data["files"] = json.loads(data["files"] or "[]")
    data["totals"] = json.loads(data["totals"]) if data["totals"] else None
    return data


_APPLY: dict[str, Callable[[sqlite3.Connection, dict[str, Any]], None]] = {
    "file": _file,
    "parsed": _parsed,
    "retract_edges": _retract_edges,
    "retract_file": _retract_file,
    "llm_edge": _llm_edge,
    "run_requested": _run_requested,
    "run_file": _run_file,
    "run_completed": _run_completed,
}
