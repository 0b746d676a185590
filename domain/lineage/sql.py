"""``extract_sql_lineage``: table and column lineage of a SQL text, without any I/O.

Pipeline: neutralise dbt Jinja -> split the text into statements (looking through
stored procedures and scripting blocks, see :mod:`domain.lineage.script`) -> parse
each statement with sqlglot -> table facts (:mod:`domain.lineage.tables`) -> column
lineage for writing statements (:mod:`domain.lineage.statement_columns`) -> union
over the script with temporary tables passed through.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from domain.lineage.aggregate import Aggregate, Leaf, TemporaryTables, aggregate
from domain.lineage.columns import SourceColumn
from domain.lineage.dialects import SqlDialect, resolve_dialect
from domain.lineage.jinja import has_jinja, strip_jinja
from domain.lineage.models import ColumnEdge, SqlLineage, StatementLineage
from domain.lineage.names import TableRef, table_ref_from_tokens
from domain.lineage.parsing import (
    ScannedTables,
    created_query_start,
    is_insert_exec,
    is_lineage_command,
    new_parser,
    parse_fragment,
    parse_tokens,
    scan_tables,
)
from domain.lineage.schema import SchemaCatalog, declared_columns
from domain.lineage.script import Fragment, Item, Routine, split_plainly, split_script
from domain.lineage.statement_columns import ColumnPair, StatementColumnLineage
from domain.lineage.tables import TableFacts, table_facts
from domain.lineage.tokens import LineIndex, keyword, neutralise_delimiters

_TRIGGER_ROWS = ("inserted", "deleted")
_COLUMN_KINDS = frozenset({"insert", "ctas", "create", "view", "merge", "update", "select_into"})


def extract_sql_lineage(sql: str, dialect: str | None = None) -> SqlLineage:
    """Extract table and column lineage from a SQL text (one or many statements).

    Args:
        sql: SQL text: a statement, a script, stored procedures, or a simple dbt model.
        dialect: one of ansi (or None), bigquery, databricks, duckdb, hive, mysql,
            oracle, postgres, redshift, snowflake, spark (alias sparksql), tsql.

    Returns:
        The lineage; statements that could not be parsed are reported in
        ``warnings`` (with what a keyword scan found), never raised.

    Raises:
        UnknownDialect: when ``dialect`` is not supported.
    """
    resolved = resolve_dialect(dialect)
    text = strip_jinja(sql) if has_jinja(sql) else sql
    return _Extraction(neutralise_delimiters(text), resolved).run()


@dataclass
class _Record:
    """A statement being built, with tables as :class:`TableRef` for aggregation."""

    kind: str
    start: int
    end: int
    sources: list[TableRef] = field(default_factory=list)
    targets: list[TableRef] = field(default_factory=list)
    edges: list[ColumnPair] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    name: str | None = None
    children: list[_Record] = field(default_factory=list)


class _Extraction:
    """One run of the extractor over one text."""

    def __init__(self, text: str, dialect: SqlDialect) -> None:
        self.text = text
        self.dialect = dialect
        self.lines = LineIndex(text)
        self.parser = new_parser(dialect)
        self.catalog = SchemaCatalog()
        self.temporary = TemporaryTables()

    def run(self) -> SqlLineage:
        records = [self._item(item) for item in self._items()]
        total = aggregate(_leaves(records), self.temporary)
        return SqlLineage(
            sources=sorted({ref.name for ref in total.sources}),
            targets=sorted({ref.name for ref in total.targets}),
            columns=_edges(total.edges),
            statements=[self._statement(record) for record in records],
            warnings=[warning for record in _all(records) for warning in record.warnings],
            dialect=self.dialect.name,
        )

    def _items(self) -> list[Item]:
        try:
            return split_script(self.text, self.dialect)
        except Exception:  # a splitter bug must not lose the file: split on ';' instead
            return split_plainly(self.text, self.dialect)

    # -- items ------------------------------------------------------------------------

    def _item(self, item: Item) -> _Record:
        try:
            if isinstance(item, Fragment):
                return self._fragment(item)
            if isinstance(item, Routine):
                return self._routine(item)
            message = item.message
        except Exception as failure:  # an extractor bug must not lose the rest of the file
            message = f"statement skipped after an internal error ({type(failure).__name__})"
        record = _Record("unparsed", item.start, item.end)
        record.warnings.append(self._where(item.start, item.end) + message)
        return record

    def _routine(self, routine: Routine) -> _Record:
        children = [self._item(item) for item in routine.items]
        trigger_table = table_ref_from_tokens(routine.on_table, 0, self.dialect)
        if trigger_table is not None and self.dialect.name == "tsql":
            rebind = {key: trigger_table for key in _TRIGGER_ROWS}
            children = [_rebound(child, rebind) for child in children]
        total: Aggregate = aggregate(_leaves(children), self.temporary)
        return _Record(
            kind=routine.kind,
            start=routine.start,
            end=routine.end,
            sources=total.sources,
            targets=total.targets,
            edges=total.edges,
            name=routine.name,
            children=children,
        )

    def _fragment(self, fragment: Fragment) -> _Record:
        outcome = parse_fragment(fragment, self.parser)
        expression = outcome.expression
        if expression is None and is_insert_exec(fragment):
            found = scan_tables(fragment, self.dialect)
            return _Record("insert", fragment.start, fragment.end, [], found.targets)
        if expression is None or is_lineage_command(expression, fragment):
            return self._scanned(fragment, outcome.error or "syntax not supported by the parser")
        try:
            facts = table_facts(expression, self.dialect, fragment.in_body)
        except Exception as failure:  # unexpected tree shapes: keep what a scan finds
            return self._scanned(fragment, f"{type(failure).__name__}: {str(failure)[:120]}")
        if fragment.select_only:
            facts = TableFacts("select", sources=facts.sources)
        record = _Record(facts.kind, fragment.start, fragment.end, facts.sources, facts.targets)
        self.temporary.add_all(facts.temporary_targets)
        self._remember_table_variables(expression)
        if facts.kind in _COLUMN_KINDS and facts.targets and not fragment.select_only:
            self._columns(expression, record, fragment.variables)
        return record

    def _scanned(self, fragment: Fragment, error: str) -> _Record:
        found = scan_tables(fragment, self.dialect)
        if found.temporary:
            self.temporary.add_all(found.targets)
        recovered = self._created_from_query(fragment, found)
        if recovered is not None:
            return recovered
        record = _Record("unparsed", fragment.start, fragment.end, found.sources, found.targets)
        detail = "tables were found by keyword scan" if found.sources or found.targets else ""
        message = f"could not parse statement ({error})"
        record.warnings.append(self._where(fragment.start, fragment.end) + _join(message, detail))
        return record

    def _created_from_query(self, fragment: Fragment, found: ScannedTables) -> _Record | None:
        """``CREATE <options sqlglot rejects> AS SELECT ...``: lineage from the query alone."""
        query_start = created_query_start(fragment)
        if query_start is None or len(found.targets) != 1:
            return None
        outcome = parse_tokens(list(fragment.tokens[query_start:]), fragment.sql, self.parser)
        query = outcome.expression
        if not isinstance(query, exp.Query):
            return None
        target = found.targets[0]
        header = fragment.tokens[:query_start]
        kind = "view" if any(keyword(token) == "VIEW" for token in header) else "ctas"
        facts = table_facts(query, self.dialect, fragment.in_body)
        record = _Record(kind, fragment.start, fragment.end, facts.sources, [target])
        self._columns(query, record, fragment.variables, target)
        return record

    def _columns(
        self,
        expression: exp.Expr,
        record: _Record,
        variables: frozenset[str],
        into: TableRef | None = None,
    ) -> None:
        try:
            lineage = StatementColumnLineage(self.dialect, self.catalog, variables)
            if into is None:
                result = lineage.run(expression)
            else:
                result = lineage.query_into(expression, into)
        except RecursionError:
            result = None
            error = "statement too deeply nested"
        except Exception as failure:  # sqlglot scope code raises many types
            result = None
            error = f"{type(failure).__name__}: {str(failure)[:120]}"
        if result is None:
            message = f"column lineage unavailable ({error}); table lineage kept"
            record.warnings.append(self._where(record.start, record.end) + message)
            return
        record.edges = _unique_pairs(result.edges)
        for table, columns in result.schemas.items():
            self.catalog.register(table, columns)
        if result.ambiguous:
            names = ", ".join(sorted(result.ambiguous))
            message = f"ambiguous unqualified column(s) not attributed: {names}"
            record.notes.append(self._where(record.start, record.end) + message)

    def _remember_table_variables(self, expression: exp.Expr) -> None:
        if not isinstance(expression, exp.Declare):
            return
        for item in expression.expressions:
            names = item.this if isinstance(item.this, list) else [item.this]
            columns = declared_columns(item.args.get("kind"), self.dialect)
            for name in names:
                if isinstance(name, exp.Parameter) and columns:
                    variable = "@" + name.name.lower()
                    ref = TableRef(name=variable, key=variable, temporary=True)
                    self.catalog.register(ref, columns)

    # -- output ---------------------------------------------------------------------------

    def _where(self, start: int, end: int) -> str:
        first, last = self.lines.line(start), self.lines.line(end)
        return f"line {first}: " if first == last else f"lines {first}-{last}: "

    def _statement(self, record: _Record) -> StatementLineage:
        return StatementLineage(
            kind=record.kind,
            line_start=self.lines.line(record.start),
            line_end=self.lines.line(record.end),
            sources=_names(record.sources),
            targets=_names(record.targets),
            columns=_edges(record.edges),
            warnings=[*record.warnings, *record.notes],
            name=record.name,
            children=[self._statement(child) for child in record.children],
        )


def _leaves(records: list[_Record]) -> list[Leaf]:
    leaves: list[Leaf] = []
    for record in records:
        if record.children:
            leaves += _leaves(record.children)
        elif not record.name:
            leaves.append((record.sources, record.targets, record.edges))
    return leaves


def _rebound(record: _Record, mapping: dict[str, TableRef]) -> _Record:
    """The record with T-SQL trigger row sets (``inserted``/``deleted``) renamed."""

    def table(ref: TableRef) -> TableRef:
        return mapping.get(ref.key, ref)

    def column(ref: SourceColumn) -> SourceColumn:
        return SourceColumn(table(ref.table), ref.column)

    return _Record(
        kind=record.kind,
        start=record.start,
        end=record.end,
        sources=[table(ref) for ref in record.sources],
        targets=[table(ref) for ref in record.targets],
        edges=[(column(source), column(target)) for source, target in record.edges],
        warnings=record.warnings,
        notes=record.notes,
        name=record.name,
        children=[_rebound(child, mapping) for child in record.children],
    )


def _all(records: list[_Record]) -> list[_Record]:
    everything: list[_Record] = []
    for record in records:
        everything.append(record)
        everything += _all(record.children)
    return everything


def _names(refs: list[TableRef]) -> list[str]:
    return sorted({ref.name for ref in refs})


def _edges(pairs: list[ColumnPair]) -> list[ColumnEdge]:
    edges = {ColumnEdge(_column(source), _column(target)) for source, target in pairs}
    return sorted(edges)


def _column(column: SourceColumn) -> str:
    return column.table.column(column.column)


def _unique_pairs(pairs: list[ColumnPair]) -> list[ColumnPair]:
    return list(dict.fromkeys(pairs))


def _join(message: str, detail: str) -> str:
    return f"{message}; {detail}" if detail else message
