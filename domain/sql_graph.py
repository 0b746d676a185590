"""Turning :class:`domain.lineage.SqlLineage` statements into graph nodes and edges (pure).

Used for plain ``.sql`` files (the process is the file, or the stored procedure that holds the
statement) and for SQL strings run from Python (the process is the enclosing function).
Temporary tables (T-SQL ``#t``, ``CREATE TEMP TABLE``, Spark temp views, including those a
Python file registers with ``createOrReplaceTempView``) never become nodes: what is read
through them is attributed to the real tables they were filled from, for tables and columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from domain.graph import NodeKind, Rel
from domain.graph_builder import GraphBuilder, Lines
from domain.lineage import SqlLineage, StatementLineage

ROUTINE_KINDS = frozenset({"procedure", "function", "trigger"})
CREATING_KINDS = frozenset({"ctas", "create", "view", "select_into"})
LOADING_KINDS = frozenset({"insert", "merge", "copy", "ctas", "select_into", "unparsed"})
KEYWORD_SCAN_CONFIDENCE = 0.7

DatasetFactory = Callable[[str, NodeKind, bool], str]
"""(dataset name, kind, defined in this file) -> urn of the node created for it."""


@dataclass
class SqlEmission:
    """What one SQL text did, at the dataset level (names as reported by the extractor)."""

    reads: list[tuple[str, Lines]] = field(default_factory=list)
    writes: list[tuple[str, Lines]] = field(default_factory=list)
    pairs: set[tuple[str, str]] = field(default_factory=set)  # (target, source) names
    # targets of data-loading statements without a source (``INSERT ... VALUES (?, ?)``):
    # their data comes from outside the SQL text (e.g. the parameters of a Python call)
    loaded: list[str] = field(default_factory=list)


def table_of(column: str) -> str:
    """``schema.table`` of a ``schema.table.column`` string."""
    return column.rsplit(".", 1)[0] if "." in column else ""


def column_part(column: str) -> str:
    return column.rsplit(".", 1)[-1]


class SqlEmitter:
    """Emits the statements of one or several SQL texts found in one file."""

    def __init__(self, builder: GraphBuilder, dataset: DatasetFactory | None = None) -> None:
        self.b = builder
        self._dataset = dataset or self._default_dataset
        self.temp_sources: dict[str, set[str]] = {}
        self.temp_columns: dict[str, set[str]] = {}

    def _default_dataset(self, name: str, kind: NodeKind, defined_here: bool) -> str:
        return self.b.node(kind, name, self.b.path if defined_here else None)

    def register_temp(self, name: str, sources: Iterable[str]) -> None:
        """A temporary view/table made outside SQL (e.g. ``df.createOrReplaceTempView``)."""
        self.temp_sources.setdefault(name.lower(), set()).update(sources)

    def is_temp(self, name: str) -> bool:
        return name.startswith(("#", "@")) or name.lower() in self.temp_sources

    def dataset_urn(self, name: str, kind: NodeKind = NodeKind.TABLE) -> str:
        return self._dataset(name, kind, False)

    # -- statements -----------------------------------------------------------------------

    def emit(
        self,
        lineage: SqlLineage,
        owner: str,
        *,
        owner_reads_all: bool,
        lines: Lines | None = None,
        context: str = "",
    ) -> SqlEmission:
        """Emit every statement; ``lines`` overrides the statements' own line ranges."""
        reported = set(lineage.sources) | set(lineage.targets)
        for name in _statement_names(lineage.statements):
            if name not in reported:
                self.temp_sources.setdefault(name.lower(), set())
        for warning in lineage.warnings:
            self.b.warn(f"{context}{warning}")
        emission = SqlEmission()
        self._walk(lineage.statements, owner, owner_reads_all, lines, lineage.dialect, emission)
        return emission

    def _walk(
        self,
        statements: list[StatementLineage],
        owner: str,
        owner_reads_all: bool,
        lines: Lines | None,
        dialect: str,
        emission: SqlEmission,
    ) -> None:
        for statement in statements:
            where = lines or (statement.line_start, statement.line_end)
            if statement.kind in ROUTINE_KINDS and statement.name:
                routine = self.b.node(
                    NodeKind.PROCEDURE, statement.name, self.b.path, routine_kind=statement.kind
                )
                self.b.edge(Rel.DEFINED_IN, routine, self.b.file_urn, where, dialect=dialect)
                body = statement.children or [statement]
                if statement.children:
                    self._walk(body, routine, True, lines, dialect, emission)
                else:
                    self._leaf(statement, routine, True, where, dialect, emission)
            elif statement.children:
                self._walk(statement.children, owner, owner_reads_all, lines, dialect, emission)
            else:
                self._leaf(statement, owner, owner_reads_all, where, dialect, emission)

    def _leaf(
        self,
        statement: StatementLineage,
        owner: str,
        owner_reads_all: bool,
        where: Lines,
        dialect: str,
        emission: SqlEmission,
    ) -> None:
        scanned = statement.kind == "unparsed"
        confidence = KEYWORD_SCAN_CONFIDENCE if scanned else 1.0
        method = "keyword_scan" if scanned else None
        sources: set[str] = set()
        for name in statement.sources:
            if self.is_temp(name):
                sources |= self.temp_sources.get(name.lower(), set())
            else:
                sources.add(name)
        real_targets = [name for name in statement.targets if not self.is_temp(name)]
        for name in statement.targets:
            if self.is_temp(name):
                self.temp_sources.setdefault(name.lower(), set()).update(sources)
        creating = statement.kind in CREATING_KINDS
        kind = NodeKind.VIEW if statement.kind == "view" else NodeKind.TABLE
        evidence = _Evidence(dialect, confidence, method)
        target_urns: dict[str, str] = {}
        for name in real_targets:
            urn = self._dataset(name, kind, creating)
            target_urns[name] = urn
            self._edge(Rel.WRITES_TO, owner, urn, where, evidence)
            if creating:
                self._edge(Rel.DEFINED_IN, urn, self.b.file_urn, where, evidence)
            emission.writes.append((name, where))
            if not sources and statement.kind in LOADING_KINDS:
                emission.loaded.append(name)
        source_urns = {name: self.dataset_urn(name) for name in sorted(sources)}
        for name, urn in source_urns.items():
            emission.reads.append((name, where))
            if owner_reads_all or not real_targets:
                self._edge(Rel.READS_FROM, owner, urn, where, evidence)
        for target, target_urn in target_urns.items():
            for source, source_urn in source_urns.items():
                if target == source:
                    continue
                emission.pairs.add((target, source))
                self._edge(Rel.READS_FROM, target_urn, source_urn, where, evidence, via=owner)
        self._columns(statement, where, dialect, confidence)

    def _edge(
        self,
        rel: Rel,
        source: str,
        target: str,
        where: Lines,
        evidence: _Evidence,
        via: str | None = None,
    ) -> None:
        self.b.edge(
            rel,
            source,
            target,
            where,
            dialect=evidence.dialect,
            confidence=evidence.confidence,
            via=via,
            method=evidence.method,
        )

    def _columns(
        self, statement: StatementLineage, where: Lines, dialect: str, confidence: float
    ) -> None:
        for edge in statement.columns:
            sources = self.resolve_column(edge.source)
            target_table = table_of(edge.target)
            if self.is_temp(target_table):
                self.temp_columns.setdefault(edge.target.lower(), set()).update(sources)
                continue
            target = self.column_node(edge.target)
            for source in sorted(sources):
                self.b.edge(
                    Rel.DERIVES,
                    target,
                    self.column_node(source),
                    where,
                    dialect=dialect,
                    confidence=confidence,
                )

    def resolve_column(self, column: str) -> set[str]:
        """Real ``table.column`` strings a column stands for (temporary tables passed through)."""
        table = table_of(column)
        if not self.is_temp(table):
            return {column}
        key = column.lower()
        if key in self.temp_columns:
            return set(self.temp_columns[key])
        name = column_part(column)
        prefix = table.lower() + "."
        if name == "*":
            found: set[str] = set()
            for known, sources in self.temp_columns.items():
                if known.startswith(prefix):
                    found |= sources
            return found
        star = self.temp_columns.get(prefix + "*", set())
        return {source[:-1] + name if source.endswith(".*") else source for source in star}

    def column_node(self, column: str) -> str:
        table, name = table_of(column), column_part(column)
        return self.b.node(NodeKind.COLUMN, column, None, table=table, column=name)


@dataclass(frozen=True)
class _Evidence:
    dialect: str
    confidence: float
    method: str | None


def _statement_names(statements: list[StatementLineage]) -> set[str]:
    names: set[str] = set()
    for statement in statements:
        names |= set(statement.sources) | set(statement.targets)
        names |= _statement_names(statement.children)
    return names
