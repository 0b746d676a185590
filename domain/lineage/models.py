"""Value objects returned by the SQL lineage extractor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JsonDict = dict[str, Any]


@dataclass(frozen=True, order=True)
class ColumnEdge:
    """One column-level dependency: ``target`` is (partly) computed from ``source``.

    Both ends are ``table.column`` strings; the table part is written exactly as it
    is reported in ``sources``/``targets``. ``table.*`` stands for "every column"
    when a ``SELECT *`` could not be expanded because the table's schema is unknown.
    """

    source: str
    target: str

    def to_json(self) -> dict[str, str]:
        """Return the edge as ``{"source": ..., "target": ...}``."""
        return {"source": self.source, "target": self.target}


@dataclass(frozen=True, eq=True)
class StatementLineage:
    """Lineage of one SQL statement (or of one stored routine, see ``children``).

    ``kind`` is one of: select, insert, ctas, create, view, merge, update, delete,
    select_into, copy, load, rename, set, declare, ddl, command, unparsed (tables
    found by keyword scan only), the routine kinds procedure, function, trigger and
    package, or the lower-cased sqlglot expression name of other statements.
    Line numbers are 1-based and refer to the original text. ``warnings`` also
    carries notes such as unattributed ambiguous columns.
    For a routine (``procedure``/``function``/``trigger``) ``children`` holds the
    statements recovered from its body; the routine's own ``sources``, ``targets``
    and ``columns`` summarise them, with temporary tables passed through.
    Tables in a single statement are reported as written, temporary ones included.
    """

    kind: str
    line_start: int
    line_end: int
    sources: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    columns: list[ColumnEdge] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    name: str | None = None
    children: list[StatementLineage] = field(default_factory=list)

    def to_json(self) -> JsonDict:
        """Return a JSON-ready dict of this statement (children included)."""
        data: JsonDict = {
            "kind": self.kind,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "sources": list(self.sources),
            "targets": list(self.targets),
            "columns": [edge.to_json() for edge in self.columns],
            "warnings": list(self.warnings),
        }
        if self.name is not None:
            data["name"] = self.name
        if self.children:
            data["children"] = [child.to_json() for child in self.children]
        return data


@dataclass(frozen=True)
class SqlLineage:
    """Lineage of a whole SQL text: the union of its statements.

    Temporary tables (T-SQL ``#t``/``@t``, ``CREATE TEMP TABLE``, Spark temp views)
    never appear in ``sources``/``targets``; column edges are passed through them.
    A real table that the script both writes and reads is both a source and a target.
    ``warnings`` lists statements that could not be parsed (or whose column lineage
    failed), prefixed with their lines; the extractor never raises for bad SQL.
    """

    sources: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    columns: list[ColumnEdge] = field(default_factory=list)
    statements: list[StatementLineage] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    dialect: str = "ansi"

    def to_json(self) -> JsonDict:
        """Return ``{"sources": [...], "targets": [...], "columns": [...]}``, sorted."""
        return {
            "sources": sorted(self.sources),
            "targets": sorted(self.targets),
            "columns": [edge.to_json() for edge in sorted(set(self.columns))],
        }


class UnknownDialect(ValueError):
    """Raised when the caller asks for a SQL dialect the extractor does not support."""
