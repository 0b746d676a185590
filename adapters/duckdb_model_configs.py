"""The `model_configs` read model in DuckDB: one file per query-serving process.

Three tables live in the file: `model_configs` (exactly the spec's DDL), `model_config_history`
(one row per configuration event, for the audit routes) and `projection_checkpoints`. The
projection writes the view, the history and its checkpoint in one transaction, so a crash never
leaves one ahead of the other. One connection, guarded by a lock: the projection writes from its
runner's thread while the API reads from worker threads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from domain.model_config import all_disabled, not_configured, parse_usage_type

MODEL_CONFIGS_DDL = """
CREATE TABLE IF NOT EXISTS model_configs (
  id VARCHAR PRIMARY KEY DEFAULT (uuid()),
  usage_type VARCHAR NOT NULL,        -- See UsageType enum
  priority INTEGER NOT NULL,          -- 1=primary, 2=secondary, 3=tertiary
  model_id VARCHAR NOT NULL,          -- Model identifier (OpenRouter or Ollama)
  model_name VARCHAR NOT NULL,        -- Human-readable name
  provider VARCHAR NOT NULL,          -- 'openrouter' or 'ollama'
  parameters JSON,                    -- {streaming, reasoning_mode, max_tokens, temperature}
  enabled BOOLEAN NOT NULL DEFAULT true,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  UNIQUE(usage_type, priority)
);
"""

HISTORY_DDL = """
CREATE TABLE IF NOT EXISTS model_config_history (
  position BIGINT PRIMARY KEY,        -- the event's position in the store
  config_id VARCHAR,                  -- NULL for tenant-wide events (seeded, reset)
  usage_type VARCHAR,
  previous_usage_type VARCHAR,        -- set when an update moved the config to another usage
  event_type VARCHAR NOT NULL,
  actor VARCHAR,
  reason VARCHAR,
  occurred_at TIMESTAMP NOT NULL,
  changes JSON,
  state JSON
);
"""

CHECKPOINTS_DDL = """
CREATE TABLE IF NOT EXISTS projection_checkpoints (
  name VARCHAR PRIMARY KEY,
  position BIGINT NOT NULL
);
"""

_COLUMNS = (
    "id, usage_type, priority, model_id, model_name, provider, parameters, enabled, "
    "created_at, updated_at"
)
_HISTORY_COLUMNS = (
    "position, config_id, usage_type, previous_usage_type, event_type, actor, reason, "
    "occurred_at, changes, state"
)

# One operation of a projection batch: (kind, data). Kinds: insert, update, delete, history.
Operation = tuple[str, dict[str, Any]]


class DuckDBModelConfigs:
    """The read model: written by `ModelConfigsProjection`, read by the API and LLM gateway."""

    def __init__(self, path: Path | str = ":memory:") -> None:
        self.path = str(path)
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.RLock()

    # -- lifecycle ------------------------------------------------------------------------
    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._conn is None:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = duckdb.connect(self.path)
        return self._conn

    def ensure(self) -> None:
        with self._lock:
            conn = self._connection()
            for ddl in (MODEL_CONFIGS_DDL, HISTORY_DDL, CHECKPOINTS_DDL):
                conn.execute(ddl)

    def drop(self) -> None:
        """Drop the view, its history and the checkpoints (a rebuild starts from position 0)."""
        with self._lock:
            conn = self._connection()
            for table in ("model_configs", "model_config_history", "projection_checkpoints"):
                conn.execute(f"DROP TABLE IF EXISTS {table}")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN TRANSACTION")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # -- projection side ------------------------------------------------------------------
    def checkpoint(self, name: str) -> int:
        with self._lock:
            row = (
                self._connection()
                .execute("SELECT position FROM projection_checkpoints WHERE name = ?", [name])
                .fetchone()
            )
        return int(row[0]) if row else 0

    def apply(self, operations: Sequence[Operation], name: str, position: int) -> None:
        """Apply a batch in order and record `position`, all in one transaction."""
        with self._transaction() as conn:
            for kind, data in operations:
                _APPLY[kind](conn, data)
            conn.execute(
                "INSERT INTO projection_checkpoints (name, position) VALUES (?, ?) "
                "ON CONFLICT (name) DO UPDATE SET position = excluded.position",
                [name, position],
            )

    # -- queries --------------------------------------------------------------------------
    def list_configs(
        self, usage_type: str | None = None, enabled: bool | None = None
    ) -> list[dict[str, Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        if usage_type is not None:
            clauses.append("usage_type = ?")
            args.append(parse_usage_type(usage_type).value)
        if enabled is not None:
            clauses.append("enabled = ?")
            args.append(enabled)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        return self._rows(
            f"SELECT {_COLUMNS} FROM model_configs {where} ORDER BY usage_type, priority", args
        )

    def get(self, config_id: str) -> dict[str, Any] | None:
        rows = self._rows(f"SELECT {_COLUMNS} FROM model_configs WHERE id = ?", [config_id])
        return rows[0] if rows else None

    def count(self) -> int:
        with self._lock:
            row = self._connection().execute("SELECT count(*) FROM model_configs").fetchone()
        return int(row[0]) if row else 0

    def fallback_chain(self, usage_type: str) -> list[dict[str, Any]]:
        """Enabled configurations of a usage type in priority order (may be empty)."""
        usage = parse_usage_type(usage_type).value
        return self._rows(
            f"SELECT {_COLUMNS} FROM model_configs WHERE usage_type = ? AND enabled = true "
            "ORDER BY priority",
            [usage],
        )

    def get_fallback_chain(self, usage_type: str) -> list[dict[str, Any]]:
        """The chain, or the spec's 503 errors: no configuration, or all of them disabled."""
        chain = self.fallback_chain(usage_type)
        if chain:
            return chain
        if self.list_configs(usage_type=usage_type):
            raise all_disabled(parse_usage_type(usage_type).value)
        raise not_configured(parse_usage_type(usage_type).value)

    def get_active_model(self, usage_type: str) -> dict[str, Any]:
        """The first enabled configuration by priority; never a hard-coded fallback."""
        return self.get_fallback_chain(usage_type)[0]

    def history(self, config_id: str) -> list[dict[str, Any]]:
        return self._history_rows(
            f"SELECT {_HISTORY_COLUMNS} FROM model_config_history WHERE config_id = ? "
            "ORDER BY position",
            [config_id],
        )

    def history_for_usage(self, usage_type: str | None = None) -> list[dict[str, Any]]:
        """Events of every configuration of a usage type (deleted ones included), and the
        tenant-wide seed/reset events; every event when `usage_type` is None."""
        if usage_type is None:
            return self._history_rows(
                f"SELECT {_HISTORY_COLUMNS} FROM model_config_history ORDER BY position", []
            )
        usage = parse_usage_type(usage_type).value
        return self._history_rows(
            f"SELECT {_HISTORY_COLUMNS} FROM model_config_history "
            "WHERE usage_type = ? OR previous_usage_type = ? OR config_id IS NULL "
            "ORDER BY position",
            [usage, usage],
        )

    def dump(self) -> list[tuple[Any, ...]]:
        """Every row of `model_configs` as stored, sorted: to compare a rebuild with the live."""
        with self._lock:
            return (
                self._connection()
                .execute(f"SELECT {_COLUMNS} FROM model_configs ORDER BY id")
                .fetchall()
            )

    def _rows(self, sql: str, args: list[Any]) -> list[dict[str, Any]]:
        with self._lock:
            cursor = self._connection().execute(sql, args)
            names = [d[0] for d in cursor.description or []]
            rows = cursor.fetchall()
        return [_config_row(dict(zip(names, row, strict=True))) for row in rows]

    def _history_rows(self, sql: str, args: list[Any]) -> list[dict[str, Any]]:
        with self._lock:
            cursor = self._connection().execute(sql, args)
            names = [d[0] for d in cursor.description or []]
            rows = cursor.fetchall()
        return [_history_row(dict(zip(names, row, strict=True))) for row in rows]


def _config_row(row: dict[str, Any]) -> dict[str, Any]:
    row["parameters"] = json.loads(row["parameters"]) if row["parameters"] else {}
    for key in ("created_at", "updated_at"):
        row[key] = _iso(row[key])
    return row


def _history_row(row: dict[str, Any]) -> dict[str, Any]:
    for key in ("changes", "state"):
        row[key] = json.loads(row[key]) if row[key] else None
    row["occurred_at"] = _iso(row["occurred_at"])
    return row


def _iso(value: Any) -> Any:
    return value.isoformat() + "Z" if isinstance(value, datetime) else value


def _insert(conn: duckdb.DuckDBPyConnection, d: dict[str, Any]) -> None:
    conn.execute(
        f"INSERT INTO model_configs ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            d["id"],
            d["usage_type"],
            d["priority"],
            d["model_id"],
            d["model_name"],
            d["provider"],
            _json(d["parameters"]),
            d["enabled"],
            d["at"],
            d["at"],
        ],
    )


def _update(conn: duckdb.DuckDBPyConnection, d: dict[str, Any]) -> None:
    conn.execute(
        "UPDATE model_configs SET usage_type = ?, priority = ?, model_id = ?, model_name = ?, "
        "provider = ?, parameters = ?, enabled = ?, updated_at = ? WHERE id = ?",
        [
            d["usage_type"],
            d["priority"],
            d["model_id"],
            d["model_name"],
            d["provider"],
            _json(d["parameters"]),
            d["enabled"],
            d["at"],
            d["id"],
        ],
    )


def _delete(conn: duckdb.DuckDBPyConnection, d: dict[str, Any]) -> None:
    conn.execute("DELETE FROM model_configs WHERE id = ?", [d["id"]])


def _history(conn: duckdb.DuckDBPyConnection, d: dict[str, Any]) -> None:
    conn.execute(
        f"INSERT INTO model_config_history ({_HISTORY_COLUMNS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            d["position"],
            d.get("config_id"),
            d.get("usage_type"),
            d.get("previous_usage_type"),
            d["event_type"],
            d.get("actor"),
            d.get("reason"),
            d["at"],
            _json(d.get("changes")),
            _json(d.get("state")),
        ],
    )


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


_APPLY = {"insert": _insert, "update": _update, "delete": _delete, "history": _history}
