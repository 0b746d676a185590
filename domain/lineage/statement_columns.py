"""Column lineage of a writing statement: target columns <- source columns.

Maps the output columns of the statement's query onto the written table: by the
explicit column list, by position when the target schema is known from earlier DDL,
otherwise by output name. MERGE and UPDATE are rewritten into equivalent SELECTs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from domain.lineage.columns import STAR, Output, QueryColumns, SourceColumn, output_identifier
from domain.lineage.dialects import SqlDialect
from domain.lineage.names import TableRef, identifier_key, identifier_output, table_ref
from domain.lineage.schema import KnownColumn, SchemaCatalog, declared_columns
from domain.lineage.tables import resolve_update_target

ColumnPair = tuple[SourceColumn, SourceColumn]


@dataclass
class StatementColumns:
    """Column edges of one statement and the target schemas it reveals."""

    edges: list[ColumnPair] = field(default_factory=list)
    schemas: dict[TableRef, list[KnownColumn]] = field(default_factory=dict)
    ambiguous: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _Assignment:
    """``target column = value`` inside MERGE/UPDATE."""

    column: exp.Identifier
    value: exp.Expr


class StatementColumnLineage:
    """Computes :class:`StatementColumns` for INSERT, CTAS, views, MERGE, UPDATE, SELECT INTO."""

    def __init__(
        self,
        dialect: SqlDialect,
        catalog: SchemaCatalog,
        variables: frozenset[str] = frozenset(),
    ) -> None:
        self.dialect = dialect
        self.catalog = catalog
        self.queries = QueryColumns(dialect, catalog, variables)
        self.result = StatementColumns()

    def run(self, expression: exp.Expr) -> StatementColumns:
        """Dispatch on the statement type; unknown types give no edges."""
        if isinstance(expression, exp.Insert):
            self._insert(expression, expression.expression, expression.args.get("with_"))
        elif isinstance(expression, exp.MultitableInserts):
            self._multitable(expression)
        elif isinstance(expression, (exp.Create, exp.Cache)):
            self._create(expression)
        elif isinstance(expression, exp.Merge):
            self._merge(expression)
        elif isinstance(expression, exp.Update):
            self._update(expression)
        elif isinstance(expression, exp.Select) and expression.args.get("into"):
            self._select_into(expression)
        self.result.ambiguous |= self.queries.ambiguous
        return self.result

    def query_into(self, query: exp.Expr, target: TableRef) -> StatementColumns:
        """Edges of ``query`` written into ``target`` (used when only the query parses)."""
        self._map(self.queries.outputs(query), target, None, False)
        self.result.ambiguous |= self.queries.ambiguous
        return self.result

    # -- INSERT / CTAS / views ---------------------------------------------------------

    def _insert(self, insert: exp.Insert, query: exp.Expr | None, with_: exp.Expr | None) -> None:
        target = self._target(insert.this)
        query = _unwrapped(query)
        if isinstance(query, exp.Values):
            query = _values_as_select(query)
        if target is None or not isinstance(query, exp.Query):
            return
        if isinstance(with_, exp.With) and not query.args.get("with_"):
            query = query.copy()
            query.set("with_", with_.copy())
        explicit = declared_columns(insert.this, self.dialect)
        self._map(self.queries.outputs(query), target, explicit or None, bool(explicit))

    def _multitable(self, statement: exp.MultitableInserts) -> None:
        source = statement.args.get("source")
        for insert in statement.find_all(exp.Insert):
            query = insert.expression
            if isinstance(query, exp.Select) and not query.args.get("from_") and source:
                query = query.copy()
                query.set("from_", exp.From(this=_as_from_item(source.copy())))
            elif isinstance(query, (exp.Values, exp.Tuple)) and isinstance(source, exp.Query):
                query = _values_over(query, source)
            elif query is None and isinstance(source, exp.Query):
                query = source
            self._insert(insert, query, None)

    def _create(self, create: exp.Create | exp.Cache) -> None:
        query = _unwrapped(create.expression)
        target = self._target(create.this)
        if target is None:
            return
        declared = declared_columns(create.this, self.dialect)
        if not isinstance(query, exp.Query):
            if declared:
                self.result.schemas[target] = declared
            return
        self._map(self.queries.outputs(query), target, declared or None, bool(declared))

    def _select_into(self, select: exp.Select) -> None:
        into = select.args["into"]
        target = self._target(into.this)
        if target is None:
            return
        query = select.copy()
        query.set("into", None)
        self._map(self.queries.outputs(query), target, None, False)

    # -- MERGE / UPDATE -------------------------------------------------------------------

    def _merge(self, merge: exp.Merge) -> None:
        target_node = merge.this
        using = merge.args.get("using")
        target = self._target(target_node)
        whens = merge.args.get("whens")
        if target is None or not isinstance(target_node, exp.Table) or using is None:
            return
        assignments: list[_Assignment] = []
        for when in whens.expressions if isinstance(whens, exp.Whens) else []:
            then = when.args.get("then")
            if isinstance(then, exp.Update):
                assignments += self._set_items(then.expressions, target, using)
            elif isinstance(then, exp.Insert):
                assignments += self._insert_items(then, target, using)
        self._assign(assignments, target, target_node, [using])

    def _update(self, update: exp.Update) -> None:
        target_node = resolve_update_target(update, self.dialect)
        target = self._target(target_node)
        if target is None or not isinstance(target_node, exp.Table):
            return
        assignments = self._set_items(update.expressions, target, None)
        this = update.this
        from_ = update.args.get("from_")
        items: list[exp.Expr] = []
        if isinstance(from_, exp.From):
            items.append(from_.this)
        items += [join.this for join in update.args.get("joins") or []]
        if isinstance(this, exp.Table):
            items += [join.this for join in this.args.get("joins") or []]
        self._assign(assignments, target, target_node, items, always_join_target=True)

    def _set_items(
        self, items: list[exp.Expr], target: TableRef, using: exp.Expr | None
    ) -> list[_Assignment]:
        assignments: list[_Assignment] = []
        for item in items:
            if isinstance(item, exp.Star) and using is not None:
                self._star_merge(target, using)
            elif isinstance(item, exp.EQ) and isinstance(item.this, exp.Column):
                column = item.this.this
                if isinstance(column, exp.Identifier):
                    assignments.append(_Assignment(column, item.expression))
            elif isinstance(item, exp.EQ) and isinstance(item.this, exp.Tuple):
                assignments += _row_assignments(item.this, item.expression)
        return assignments

    def _insert_items(
        self, insert: exp.Insert, target: TableRef, using: exp.Expr
    ) -> list[_Assignment]:
        columns = insert.this
        values = insert.expression
        value_list = values.expressions if isinstance(values, exp.Tuple) else []
        misparsed = _values_call(columns)
        if misparsed is not None:
            columns, value_list = None, misparsed
        if isinstance(columns, exp.Star) or (columns is None and not value_list):
            self._star_merge(target, using)
            return []
        if columns is None:
            names = self._implicit_insert_columns(target, value_list)
        else:
            names = [c.this if isinstance(c, exp.Column) else c for c in columns.expressions]
        return [
            _Assignment(name, value)
            for name, value in zip(names, value_list, strict=False)
            if isinstance(name, exp.Identifier)
        ]

    def _implicit_insert_columns(
        self, target: TableRef, values: list[exp.Expr]
    ) -> list[exp.Expr | None]:
        """``INSERT VALUES (...)`` without a column list: the target schema by position,
        else the names of the inserted columns."""
        known = self.catalog.columns(target)
        if known and len(known) == len(values):
            return [
                exp.Identifier(this=column.name, quoted=column.name != column.name.lower())
                for column in known
            ]
        return [output_identifier(value) for value in values]

    def _star_merge(self, target: TableRef, using: exp.Expr) -> None:
        query = exp.Select(expressions=[exp.Star()], from_=exp.From(this=using.copy()))
        self._map(self.queries.outputs(query), target, None, False)

    def _assign(
        self,
        assignments: list[_Assignment],
        target: TableRef,
        target_node: exp.Table,
        from_items: list[exp.Expr],
        always_join_target: bool = False,
    ) -> None:
        if not assignments:
            return
        items = [item.copy() for item in from_items if item is not None]
        if always_join_target or not items:
            if not any(self._same_table(item, target_node) for item in from_items):
                bare = target_node.copy()
                bare.set("joins", None)
                items.insert(0, bare)
        elif self._mentions(assignments, target_node):
            bare = target_node.copy()
            bare.set("joins", None)
            items.append(bare)
        projections = [
            exp.alias_(assignment.value.copy(), f"_c{index}")
            for index, assignment in enumerate(assignments)
        ]
        query = exp.Select(
            expressions=projections,
            from_=exp.From(this=items[0]),
            joins=[exp.Join(this=item) for item in items[1:]],
        )
        outputs = self.queries.outputs(query)
        for assignment, output in zip(assignments, outputs, strict=False):
            column = SourceColumn(target, identifier_output(assignment.column))
            self.result.edges += [(source, column) for source in sorted_sources(output)]

    def _same_table(self, item: exp.Expr | None, target_node: exp.Table) -> bool:
        if item is target_node:
            return True
        if not isinstance(item, exp.Table) or item.alias != target_node.alias:
            return False
        item_ref, target_ref = table_ref(item, self.dialect), table_ref(target_node, self.dialect)
        return item_ref is not None and target_ref is not None and item_ref.key == target_ref.key

    def _mentions(self, assignments: list[_Assignment], target_node: exp.Table) -> bool:
        alias = identifier_key(exp.to_identifier(target_node.alias_or_name), self.dialect)
        for assignment in assignments:
            for column in assignment.value.find_all(exp.Column):
                qualifier = column.args.get("table")
                if not isinstance(qualifier, exp.Identifier):
                    continue
                if identifier_key(qualifier, self.dialect) == alias:
                    return True
        return False

    # -- mapping outputs to target columns -----------------------------------------------

    def _target(self, node: exp.Expr | None) -> TableRef | None:
        if isinstance(node, exp.Schema):
            node = node.this
        return table_ref(node, self.dialect) if isinstance(node, exp.Table) else None

    def _map(
        self,
        outputs: list[Output],
        target: TableRef,
        declared: list[KnownColumn] | None,
        explicit: bool,
    ) -> None:
        has_star = any(output.star for output in outputs)
        columns = declared if explicit else self.catalog.columns(target)
        if has_star:
            self._map_by_name(outputs, target)
        elif columns and len(columns) == len(outputs):
            self._map_by_position(outputs, target, columns)
        else:
            self._map_by_name(outputs, target)

    def _map_by_position(
        self, outputs: list[Output], target: TableRef, columns: list[KnownColumn]
    ) -> None:
        for output, column in zip(outputs, columns, strict=True):
            target_column = SourceColumn(target, column.name)
            self.result.edges += [(source, target_column) for source in sorted_sources(output)]
        self.result.schemas[target] = list(columns)

    def _map_by_name(self, outputs: list[Output], target: TableRef) -> None:
        schema: list[KnownColumn] = []
        complete = True
        for output in outputs:
            if output.star:
                complete = False
                for source in sorted_sources(output):
                    self.result.edges.append((source, SourceColumn(target, STAR)))
                continue
            if output.name is None or output.key is None:
                complete = False
                continue
            schema.append(KnownColumn(output.key, output.name))
            target_column = SourceColumn(target, output.name)
            self.result.edges += [(source, target_column) for source in sorted_sources(output)]
        if complete and schema:
            self.result.schemas[target] = schema


def _row_assignments(columns: exp.Tuple, value: exp.Expr) -> list[_Assignment]:
    """``SET (a, b) = (SELECT x, y ...)`` or ``= (x, y)``: one assignment per column."""
    names = [c.this if isinstance(c, exp.Column) else c for c in columns.expressions]
    select = value.this if isinstance(value, exp.Subquery) else value
    values: list[exp.Expr]
    if isinstance(select, exp.Select):
        values = []
        for projection in select.expressions:
            single = select.copy()
            single.set("expressions", [projection.copy()])
            values.append(exp.Subquery(this=single))
    elif isinstance(value, (exp.Tuple, exp.Paren)):
        values = list(value.expressions) if isinstance(value, exp.Tuple) else [value.this]
    else:
        return []
    return [
        _Assignment(name, item)
        for name, item in zip(names, values, strict=False)
        if isinstance(name, exp.Identifier)
    ]


def _unwrapped(query: exp.Expr | None) -> exp.Expr | None:
    while isinstance(query, exp.Subquery) and not query.alias:
        query = query.this
    return query


_MAX_VALUE_ROWS = 20


def _values_as_select(values: exp.Values) -> exp.Expr | None:
    """``VALUES (..), (..)`` whose rows compute from columns/subqueries, as a SELECT union.

    Rows of literals have no lineage and are skipped (the common, large case).
    """
    rows = [row for row in values.expressions[:_MAX_VALUE_ROWS] if isinstance(row, exp.Tuple)]
    if not any(row.find(exp.Column, exp.Subquery) for row in rows):
        return None
    selects: list[exp.Select] = [
        exp.Select(expressions=[item.copy() for item in row.expressions]) for row in rows
    ]
    query: exp.Expr = selects[0]
    for select in selects[1:]:
        query = exp.Union(this=query, expression=select, distinct=False)
    return query


def _values_call(columns: exp.Expr | None) -> list[exp.Expr] | None:
    """``INSERT VALUES (a, b)`` that sqlglot read as a column list holding VALUES(a, b)."""
    if not isinstance(columns, exp.Tuple) or len(columns.expressions) != 1:
        return None
    call = columns.expressions[0]
    if isinstance(call, exp.Anonymous) and str(call.this).upper() == "VALUES":
        return list(call.expressions)
    return None


def sorted_sources(output: Output) -> list[SourceColumn]:
    """An output's source columns in a stable order."""
    return sorted(output.sources, key=lambda c: (c.table.name, c.column))


def _as_from_item(source: exp.Expr) -> exp.Expr:
    if isinstance(source, exp.Query) and not isinstance(source, exp.Subquery):
        return exp.Subquery(this=source, alias=exp.TableAlias(this=exp.to_identifier("_src")))
    return source


def _values_over(values: exp.Expr, source: exp.Query) -> exp.Expr:
    row = values.expressions[0] if isinstance(values, exp.Values) else values
    items = row.expressions if isinstance(row, exp.Tuple) else []
    return exp.Select(
        expressions=[exp.alias_(item.copy(), f"_c{i}") for i, item in enumerate(items)],
        from_=exp.From(this=_as_from_item(source.copy())),
    )
