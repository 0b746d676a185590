"""`upstream lineage extract`: SQL text in, JSON lineage out, no server needed."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from domain.lineage import UnknownDialect, extract_sql_lineage


def extract_one(sql: str, dialect: str | None) -> dict[str, Any]:
    """`{"sources", "targets", "columns"}` for one SQL text (lower-cased unless quoted)."""
    result: dict[str, Any] = extract_sql_lineage(sql, dialect).to_json()
    return result


def extract_jsonl(lines: Iterable[str], default_dialect: str | None) -> Iterator[str]:
    """One result per input line `{"sql": ..., "dialect": ...}`; a bad line gives `{"error"}`."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        yield json.dumps(_extract_line(line, number, default_dialect), sort_keys=True)


def _extract_line(line: str, number: int, default_dialect: str | None) -> dict[str, Any]:
    try:
        item = json.loads(line)
    except json.JSONDecodeError as error:
        return {"error": f"line {number}: not JSON ({error.msg})"}
    if not isinstance(item, dict) or not isinstance(item.get("sql"), str):
        return {"error": f'line {number}: expected an object with a "sql" string'}
    dialect = item.get("dialect") or default_dialect
    try:
        return extract_one(item["sql"], dialect)
    except UnknownDialect as error:
        return {"error": f"line {number}: {error}"}
    except Exception as error:  # the extractor must never take the whole run down
        return {"error": f"line {number}: {type(error).__name__}: {error}"}
