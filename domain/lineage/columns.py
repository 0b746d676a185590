"""Column lineage inside one query: which base-table columns feed each output column.

Works on sqlglot's scope tree (CTEs, derived tables, subqueries, set operations,
UNNEST/FLATTEN/LATERAL VIEW) without running the optimizer: columns are resolved by
qualifier, by the only source in scope, or by schemas learnt from earlier DDL.
``SELECT *`` is expanded when the schema is known and reported as ``table.*`` when
it is not.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, build_scope

from domain.lineage.dialects import LATERAL_ALIAS_DIALECTS, STRUCT_DIALECTS, SqlDialect
from domain.lineage.names import TableRef, identifier_key, identifier_output, table_ref
from domain.lineage.schema import SchemaCatalog
from domain.lineage.tables import cte_body, is_cte_reference

STAR = "*"
_PSEUDO_COLUMNS = frozenset(
    {
        "sysdate",
        "systimestamp",
        "rownum",
        "rowid",
        "level",
        "current_date",
        "current_timestamp",
        "current_time",
        "current_user",
        "session_user",
        "localtimestamp",
        "localtime",
        "null",
        "true",
        "false",
    }
)

Source = exp.Expr | Scope


@dataclass(frozen=True)
class SourceColumn:
    """A column of a base table (``column`` is ``*`` for "all columns")."""

    table: TableRef
    column: str

    @property
    def is_star(self) -> bool:
        """True for the ``table.*`` placeholder."""
        return self.column == STAR


@dataclass(frozen=True)
class Output:
    """One output column of a query; ``star`` marks an unexpandable ``SELECT *``."""

    name: str | None
    key: str | None
    sources: frozenset[SourceColumn]
    star: bool = False


class QueryColumns:
    """Resolves the output columns of queries; one instance per statement."""

    def __init__(
        self,
        dialect: SqlDialect,
        catalog: SchemaCatalog,
        variables: frozenset[str] = frozenset(),
    ) -> None:
        self.dialect = dialect
        self.catalog = catalog
        self.variables = variables
        self.ambiguous: set[str] = set()
        self._outputs: dict[int, list[Output]] = {}
        self._in_progress: set[int] = set()
        self._children: dict[int, dict[int, Scope]] = {}

    def outputs(self, query: exp.Expr) -> list[Output]:
        """Output columns of ``query`` (a SELECT, set operation, ...) in order."""
        # Caches are keyed by id(); scopes of an earlier query may have been freed and
        # their ids reused, so every query starts with empty caches.
        self._outputs.clear()
        self._children.clear()
        self._in_progress.clear()
        _align_cte_names(query, self.dialect)
        root = build_scope(query)
        return [] if root is None else self._scope_outputs(root)

    # -- scopes --------------------------------------------------------------------

    def _scope_outputs(self, scope: Scope) -> list[Output]:
        marker = id(scope)
        if marker in self._outputs:
            return self._outputs[marker]
        if marker in self._in_progress:
            return []
        self._in_progress.add(marker)
        try:
            result = self._compute_outputs(scope)
        finally:
            self._in_progress.discard(marker)
        self._outputs[marker] = result
        return result

    def _compute_outputs(self, scope: Scope) -> list[Output]:
        expression = scope.expression
        if isinstance(expression, exp.SetOperation):
            return _merge_branches([self._scope_outputs(s) for s in scope.set_operation_scopes])
        if isinstance(expression, exp.Select):
            outputs: list[Output] = []
            for projection in expression.expressions:
                outputs.extend(self._projection_outputs(scope, projection))
            return outputs
        return []

    def _projection_outputs(self, scope: Scope, projection: exp.Expr) -> list[Output]:
        if isinstance(projection, exp.Star):
            return self._star_outputs(scope, None, projection)
        if isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
            return self._star_outputs(scope, projection.args.get("table"), projection.this)
        name = output_identifier(projection)
        sources = frozenset(self.expression_sources(scope, projection))
        if name is None:
            return [Output(None, None, sources)]
        key = identifier_key(name, self.dialect)
        return [Output(identifier_output(name), key, sources)]

    # -- stars ---------------------------------------------------------------------

    def _star_outputs(
        self, scope: Scope, qualifier: exp.Expr | None, star: exp.Expr
    ) -> list[Output]:
        chosen = self._selected(scope)
        if isinstance(qualifier, exp.Identifier):
            wanted = identifier_key(qualifier, self.dialect)
            chosen = [(key, source) for key, source in chosen if key == wanted]
        outputs: list[Output] = []
        for _, source in chosen:
            outputs.extend(self._source_star(source))
        return self._apply_star_modifiers(scope, outputs, star)

    def _source_star(self, source: Source) -> list[Output]:
        if isinstance(source, Scope):
            return [] if source.is_udtf else self._scope_outputs(source)
        if not isinstance(source, exp.Table):
            return []
        ref = table_ref(source, self.dialect)
        if ref is None:
            return []
        known = self.catalog.columns(ref)
        if known is None:
            return [Output(STAR, None, frozenset({SourceColumn(ref, STAR)}), star=True)]
        return [Output(c.name, c.key, frozenset({SourceColumn(ref, c.name)})) for c in known]

    def _apply_star_modifiers(
        self, scope: Scope, outputs: list[Output], star: exp.Expr
    ) -> list[Output]:
        excluded = {
            identifier_key(column.this if isinstance(column, exp.Column) else column, self.dialect)
            for column in star.args.get("except_") or star.args.get("except") or []
            if isinstance(column, (exp.Column, exp.Identifier))
        }
        replaced: dict[str, exp.Expr] = {}
        for item in star.args.get("replace") or []:
            if isinstance(item, exp.Alias):
                replaced[identifier_key(item.args["alias"], self.dialect)] = item.this
        result: list[Output] = []
        for output in outputs:
            if output.key in excluded:
                continue
            if output.key is not None and output.key in replaced:
                sources = frozenset(self.expression_sources(scope, replaced[output.key]))
                output = Output(output.name, output.key, sources)
            result.append(output)
        return result

    # -- expressions -----------------------------------------------------------------

    def expression_sources(self, scope: Scope, expression: exp.Expr) -> set[SourceColumn]:
        """Base columns referenced anywhere in ``expression`` (subqueries included)."""
        lambda_names = {
            identifier_key(parameter, self.dialect)
            for function in expression.find_all(exp.Lambda)
            for parameter in function.expressions
            if isinstance(parameter, exp.Identifier)
        }
        found: set[SourceColumn] = set()
        stack: list[exp.Expr] = [expression]
        while stack:
            node = stack.pop()
            if isinstance(node, exp.Column):
                found |= self._column_sources(scope, node, lambda_names)
                continue
            if node is not expression and isinstance(node, (exp.Subquery, exp.Query)):
                child = self._child_scope(scope, node)
                if child is not None:
                    for output in self._scope_outputs(child):
                        found |= output.sources
                    continue
            stack.extend(node.iter_expressions())
        return found

    def _column_sources(
        self, scope: Scope, column: exp.Column, lambda_names: set[str]
    ) -> set[SourceColumn]:
        if not isinstance(column.this, exp.Identifier):
            return set()
        parts = [p for p in column.parts if isinstance(p, exp.Identifier)]
        if len(parts) == 1:
            key = identifier_key(parts[0], self.dialect)
            lowered = parts[0].name.lower()
            if key in lambda_names or lowered in _PSEUDO_COLUMNS or lowered in self.variables:
                return set()
            return self._unqualified(scope, column, parts[0])
        return self._qualified(scope, parts)

    def _child_scope(self, scope: Scope, node: exp.Expr) -> Scope | None:
        marker = id(scope)
        if marker not in self._children:
            self._children[marker] = {id(child.expression): child for child in _nested(scope)}
        children = self._children[marker]
        child = children.get(id(node))
        if child is None and isinstance(node, exp.Subquery):
            child = children.get(id(node.this))
        return child

    # -- column resolution -------------------------------------------------------------

    def _qualified(self, scope: Scope, parts: list[exp.Identifier]) -> set[SourceColumn]:
        keys = [identifier_key(part, self.dialect) for part in parts]
        for index in range(len(parts) - 2, -1, -1):
            source = self._lookup(scope, keys[index])
            if source is not None:
                return self._from_source(source, parts[index + 1])
        if parts[0].name.lower() in self.variables:
            return set()
        selected = self._selected(scope)
        if len(selected) == 1 and self.dialect.name in STRUCT_DIALECTS:
            return self._from_source(selected[0][1], parts[0])
        return set()

    def _unqualified(
        self, scope: Scope, column: exp.Column, name: exp.Identifier
    ) -> set[SourceColumn]:
        key = identifier_key(name, self.dialect)
        selected = self._selected(scope)
        for source_key, source in selected:
            if (
                isinstance(source, Scope)
                and source.is_udtf
                and key in self._udtf_names(source, source_key)
            ):
                return self._from_source(source, name)
        lateral = self._lateral_alias(scope, column, key, selected)
        if lateral is not None:
            return lateral
        if len(selected) == 1:
            return self._from_source(selected[0][1], name)
        return self._by_schema(selected, name, key)

    def _by_schema(
        self, selected: list[tuple[str, Source]], name: exp.Identifier, key: str
    ) -> set[SourceColumn]:
        knows = [(source, self._has_column(source, key)) for _, source in selected]
        having = [source for source, has in knows if has is True]
        unknown = [source for source, has in knows if has is None]
        if len(having) == 1:
            return self._from_source(having[0], name)
        if not having and len(unknown) == 1:
            return self._from_source(unknown[0], name)
        if selected:
            self.ambiguous.add(identifier_output(name))
        return set()

    def _lateral_alias(
        self,
        scope: Scope,
        column: exp.Column,
        key: str,
        selected: list[tuple[str, Source]],
    ) -> set[SourceColumn] | None:
        select = scope.expression
        if self.dialect.name not in LATERAL_ALIAS_DIALECTS or not isinstance(select, exp.Select):
            return None
        current = _projection_of(column, select)
        if current is None:
            return None
        projections = list(select.expressions)
        position = next(i for i, p in enumerate(projections) if p is current)
        for earlier in projections[:position]:
            alias = earlier.args.get("alias") if isinstance(earlier, exp.Alias) else None
            if isinstance(alias, exp.Identifier) and identifier_key(alias, self.dialect) == key:
                if any(self._has_column(source, key) for _, source in selected):
                    return None
                return self.expression_sources(scope, earlier.this)
        return None

    def _has_column(self, source: Source, key: str) -> bool | None:
        if isinstance(source, exp.Table):
            ref = table_ref(source, self.dialect)
            known = self.catalog.columns(ref) if ref else None
            return None if known is None else any(c.key == key for c in known)
        if isinstance(source, Scope) and not source.is_udtf:
            outputs = self._scope_outputs(source)
            if any(o.key == key for o in outputs):
                return True
            return None if any(o.star for o in outputs) else False
        return None

    def _from_source(self, source: Source, name: exp.Identifier) -> set[SourceColumn]:
        if isinstance(source, exp.Table):
            ref = table_ref(source, self.dialect)
            if ref is None:
                return set()
            if not source.args.get("db") and is_cte_reference(source, ref.key, self.dialect):
                return self._returning_sources(source, ref.key, name)
            return {SourceColumn(ref, identifier_output(name))}
        if not isinstance(source, Scope):
            return set()
        if source.is_udtf:
            return self.expression_sources(source, source.expression)
        key = identifier_key(name, self.dialect)
        outputs = self._scope_outputs(source)
        for output in outputs:
            if output.key == key:
                return set(output.sources)
        star_tables = {c.table for o in outputs if o.star for c in o.sources}
        if len(star_tables) == 1:
            return {SourceColumn(star_tables.pop(), identifier_output(name))}
        return set()

    def _returning_sources(
        self, table: exp.Table, key: str, name: exp.Identifier
    ) -> set[SourceColumn]:
        """Columns of a data-modifying CTE: ``WITH d AS (DELETE FROM t RETURNING a)``."""
        dml = cte_body(table, key, self.dialect)
        if not isinstance(dml, (exp.Insert, exp.Update, exp.Delete)):
            return set()
        returning = dml.args.get("returning")
        if not isinstance(returning, exp.Returning):
            return set()
        written = dml.this.this if isinstance(dml.this, exp.Schema) else dml.this
        ref = table_ref(written, self.dialect) if isinstance(written, exp.Table) else None
        wanted = identifier_key(name, self.dialect)
        for item in returning.expressions:
            identifier = output_identifier(item)
            if ref and identifier and identifier_key(identifier, self.dialect) == wanted:
                return {
                    SourceColumn(ref, identifier_output(column.this))
                    for column in item.find_all(exp.Column)
                    if isinstance(column.this, exp.Identifier)
                }
        return set()

    def _lookup(self, scope: Scope | None, key: str) -> Source | None:
        while scope is not None:
            for source_key, source in self._selected(scope):
                if source_key == key:
                    return source
            scope = scope.parent
        return None

    def _selected(self, scope: Scope) -> list[tuple[str, Source]]:
        selected: list[tuple[str, Source]] = []
        for name, (node, source) in scope.selected_sources.items():
            selected.append((self._source_key(name, node), source))
        return selected

    def _source_key(self, name: str, node: exp.Expr) -> str:
        alias = node.args.get("alias")
        if isinstance(alias, exp.TableAlias) and isinstance(alias.this, exp.Identifier):
            return identifier_key(alias.this, self.dialect)
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            return identifier_key(node.this, self.dialect)
        return self.dialect.key(name, False)

    def _udtf_names(self, source: Scope, source_key: str) -> set[str]:
        names = {source_key}
        alias = source.expression.args.get("alias")
        if isinstance(alias, exp.TableAlias):
            for column in alias.columns:
                if isinstance(column, exp.Identifier):
                    names.add(identifier_key(column, self.dialect))
        return names


def _align_cte_names(query: exp.Expr, dialect: SqlDialect) -> None:
    """Spell CTE references like their definition when the dialect ignores case.

    sqlglot's scopes match CTE names textually; ``WITH Cte ... FROM CTE`` is the same
    CTE in T-SQL or Snowflake, so the reference is respelled (in place) to match.
    """
    spelled: dict[str, str] = {}
    for cte in query.find_all(exp.CTE):
        alias = cte.args.get("alias")
        if isinstance(alias, exp.TableAlias) and isinstance(alias.this, exp.Identifier):
            spelled.setdefault(identifier_key(alias.this, dialect), alias.this.this)
    if not spelled:
        return
    for table in query.find_all(exp.Table):
        name = table.this
        if table.args.get("db") or not isinstance(name, exp.Identifier):
            continue
        wanted = spelled.get(identifier_key(name, dialect))
        if wanted is not None and wanted != name.this:
            name.set("this", wanted)


def _nested(scope: Scope) -> list[Scope]:
    return [*scope.subquery_scopes, *scope.derived_table_scopes, *scope.set_operation_scopes]


def _merge_branches(branches: list[list[Output]]) -> list[Output]:
    if not branches:
        return []
    first = branches[0]
    merged: list[Output] = []
    for index, output in enumerate(first):
        sources = set(output.sources)
        for branch in branches[1:]:
            if index < len(branch) and branch[index].star == output.star:
                sources |= branch[index].sources
        merged.append(Output(output.name, output.key, frozenset(sources), output.star))
    return merged


def output_identifier(projection: exp.Expr) -> exp.Identifier | None:
    """The identifier naming a projection (alias, column name), if any."""
    if isinstance(projection, exp.Alias):
        alias = projection.args.get("alias")
        return alias if isinstance(alias, exp.Identifier) else None
    if isinstance(projection, exp.Column) and isinstance(projection.this, exp.Identifier):
        return projection.this
    if isinstance(projection, exp.Dot) and isinstance(projection.expression, exp.Identifier):
        return projection.expression
    return None


def _projection_of(node: exp.Expr, select: exp.Select) -> exp.Expr | None:
    child = node
    parent = node.parent
    while parent is not None and parent is not select:
        child, parent = parent, parent.parent
    if parent is select and child.arg_key == "expressions":
        return child
    return None
