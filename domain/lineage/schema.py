"""Table schemas learnt from the script itself (CREATE TABLE, CTAS, views, temp tables)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from domain.lineage.dialects import SqlDialect
from domain.lineage.names import TableRef, identifier_key, identifier_output


@dataclass(frozen=True)
class KnownColumn:
    """A column of a known table: matching key and reported name."""

    key: str
    name: str


class SchemaCatalog:
    """Columns of the tables defined earlier in the same SQL text, in definition order."""

    def __init__(self) -> None:
        self._tables: dict[str, list[KnownColumn]] = {}
        self._by_last_part: dict[str, list[str]] = {}
        self._lookups: dict[str, list[KnownColumn] | None] = {}

    def register(self, table: TableRef, columns: list[KnownColumn]) -> None:
        """Remember (or replace) the columns of ``table``."""
        if not columns:
            return
        self._tables[table.key] = columns
        last = table.key.rsplit(".", 1)[-1]
        keys = self._by_last_part.setdefault(last, [])
        if table.key not in keys:
            keys.append(table.key)
        self._lookups.clear()

    def columns(self, table: TableRef) -> list[KnownColumn] | None:
        """Known columns of ``table`` or None; an unqualified match is used when unique."""
        if table.key not in self._lookups:
            self._lookups[table.key] = self._find(table.key)
        return self._lookups[table.key]

    def _find(self, key: str) -> list[KnownColumn] | None:
        if key in self._tables:
            return self._tables[key]
        last = key.rsplit(".", 1)[-1]
        candidates = self._by_last_part.get(last, [])
        if len(candidates) == 1 and (key == last or candidates[0] == last):
            return self._tables[candidates[0]]
        return None


def declared_columns(schema: exp.Expr | None, dialect: SqlDialect) -> list[KnownColumn]:
    """Columns of a ``(col type, ...)`` list (CREATE TABLE, DECLARE @t TABLE, view columns)."""
    if not isinstance(schema, exp.Schema):
        return []
    columns: list[KnownColumn] = []
    for item in schema.expressions:
        identifier = item.this if isinstance(item, exp.ColumnDef) else item
        if isinstance(item, exp.Column):
            identifier = item.this
        if isinstance(identifier, exp.Identifier):
            columns.append(
                KnownColumn(identifier_key(identifier, dialect), identifier_output(identifier))
            )
    return columns
