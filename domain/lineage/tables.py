"""Table-level lineage of one parsed statement: its kind, the tables it writes and reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from domain.lineage.dialects import SELECT_INTO_CREATES_TABLE, SqlDialect
from domain.lineage.names import TableRef, name_key, table_ref

_NO_TABLES: tuple[type[exp.Expr], ...] = (
    exp.Drop,
    exp.TruncateTable,
    exp.Command,
    exp.Use,
    exp.Describe,
    exp.Show,
    exp.Grant,
    exp.Revoke,
    exp.Analyze,
    exp.Pragma,
    exp.Comment,
    exp.Refresh,
    exp.Commit,
    exp.Rollback,
    exp.Transaction,
    exp.Execute,
    exp.ExecuteSql,
    exp.Uncache,
    exp.Kill,
)
_NOT_SOURCES: tuple[type[exp.Expr], ...] = (exp.Reference, exp.ForeignKey, exp.Hint)
_PATH_DIALECTS = frozenset({"bigquery", "redshift"})
_DML = (exp.Insert, exp.Update, exp.Delete, exp.Merge)


@dataclass(frozen=True)
class TableFacts:
    """What one statement does at table level.

    ``temporary_targets`` lists the targets this very statement declares temporary
    (``CREATE TEMP TABLE``, Spark temp views, ``CACHE TABLE``).
    """

    kind: str
    targets: list[TableRef] = field(default_factory=list)
    sources: list[TableRef] = field(default_factory=list)
    temporary_targets: list[TableRef] = field(default_factory=list)


@dataclass
class _Shape:
    kind: str
    targets: list[exp.Table] = field(default_factory=list)
    excluded: list[exp.Expr] = field(default_factory=list)
    temporary: bool = False
    reads: bool = True
    sources: list[exp.Table] = field(default_factory=list)


def table_facts(expression: exp.Expr, dialect: SqlDialect, in_body: bool) -> TableFacts:
    """Classify a parsed statement and list the tables it writes and reads."""
    tables: list[exp.Table] = []
    nested_dml: list[exp.Expr] = []
    for node in expression.walk():
        if isinstance(node, exp.Table):
            tables.append(node)
        elif isinstance(node, _DML) and node is not expression:
            nested_dml.append(node)
    shape = _shape(expression, dialect, in_body)
    cte_dml = [node for node in nested_dml if node.find_ancestor(exp.CTE)]
    shape.targets += _nested_writes(cte_dml, dialect)
    targets = _refs(shape.targets, dialect)
    excluded = {id(node) for node in [*shape.targets, *shape.excluded]}
    sources = _refs(shape.sources, dialect)
    if shape.reads:
        sources += _source_tables(tables, excluded, dialect)
        sources += _returning_reads(cte_dml, dialect)
    return TableFacts(
        kind=shape.kind,
        targets=_unique(targets),
        sources=_unique(sources),
        temporary_targets=_unique(targets) if shape.temporary else [],
    )


def _nested_writes(cte_dml: list[exp.Expr], dialect: SqlDialect) -> list[exp.Table]:
    """Tables written by data-modifying CTEs (PostgreSQL ``WITH d AS (DELETE ...)``)."""
    written: list[exp.Table] = []
    for node in cte_dml:
        written += _shape(node, dialect, in_body=False).targets
    return written


def _returning_reads(cte_dml: list[exp.Expr], dialect: SqlDialect) -> list[TableRef]:
    """Tables whose rows a data-modifying CTE hands on through ``RETURNING``."""
    reads: list[TableRef] = []
    for node in cte_dml:
        if node.args.get("returning"):
            reads += _refs(_shape(node, dialect, in_body=False).targets, dialect)
    return reads


def _refs(tables: list[exp.Table], dialect: SqlDialect) -> list[TableRef]:
    refs = [table_ref(table, dialect) for table in tables]
    return [ref for ref in refs if ref is not None]


def _unique(refs: list[TableRef]) -> list[TableRef]:
    seen: set[str] = set()
    unique: list[TableRef] = []
    for ref in refs:
        if ref.name not in seen:
            seen.add(ref.name)
            unique.append(ref)
    return unique


# -- statement shapes ---------------------------------------------------------------


def _shape(expression: exp.Expr, dialect: SqlDialect, in_body: bool) -> _Shape:
    if isinstance(expression, exp.Insert):
        return _Shape("insert", targets=_as_tables(expression.this))
    if isinstance(expression, exp.MultitableInserts):
        inserts = list(expression.find_all(exp.Insert))
        return _Shape("insert", targets=[t for i in inserts for t in _as_tables(i.this)])
    if isinstance(expression, exp.Create):
        return _create_shape(expression)
    if isinstance(expression, exp.Merge):
        return _Shape("merge", targets=_as_tables(expression.this))
    if isinstance(expression, exp.Update):
        return _update_shape(expression, dialect)
    if isinstance(expression, exp.Delete):
        return _delete_shape(expression, dialect)
    if isinstance(expression, exp.Query):
        return _query_shape(expression, dialect, in_body)
    return _other_shape(expression)


def _other_shape(expression: exp.Expr) -> _Shape:
    if isinstance(expression, exp.Copy):
        return _copy_shape(expression)
    if isinstance(expression, exp.LoadData):
        return _Shape("load", targets=_as_tables(expression.this))
    if isinstance(expression, exp.Cache):
        return _Shape("ctas", targets=_as_tables(expression.this), temporary=True)
    if isinstance(expression, exp.Alter):
        return _alter_shape(expression)
    if isinstance(expression, exp.Set):
        return _Shape("set")
    if isinstance(expression, exp.Declare):
        return _Shape("declare")
    if isinstance(expression, _NO_TABLES):
        kind = "command" if isinstance(expression, exp.Command) else "ddl"
        return _Shape(kind, reads=False)
    return _Shape(type(expression).__name__.lower())


def _as_tables(node: exp.Expr | None) -> list[exp.Table]:
    if isinstance(node, exp.Schema):
        node = node.this
    return [node] if isinstance(node, exp.Table) else []


def _create_shape(expression: exp.Create) -> _Shape:
    kind = str(expression.args.get("kind") or "").upper()
    if "TABLE" not in kind and "VIEW" not in kind:
        return _Shape("ddl", reads=False)
    properties = expression.args.get("properties")
    temporary = bool(properties and properties.find(exp.TemporaryProperty))
    if "VIEW" in kind:
        statement_kind = "view"
    elif isinstance(expression.expression, exp.Query):
        statement_kind = "ctas"
    else:
        statement_kind = "create"
    return _Shape(statement_kind, targets=_as_tables(expression.this), temporary=temporary)


def _query_shape(expression: exp.Query, dialect: SqlDialect, in_body: bool) -> _Shape:
    into = expression.args.get("into")
    if not isinstance(into, exp.Into):
        return _Shape("select")
    creates = dialect.name in SELECT_INTO_CREATES_TABLE and (dialect.name == "tsql" or not in_body)
    tables = _as_tables(into.this)
    if creates and tables and isinstance(tables[0].this, exp.Identifier):
        temporary = bool(into.args.get("temporary"))
        return _Shape("select_into", targets=tables, temporary=temporary)
    return _Shape("select", excluded=list(into.find_all(exp.Table)))


def _copy_shape(expression: exp.Copy) -> _Shape:
    this_tables = _as_tables(expression.this)
    if expression.args.get("kind"):
        return _Shape("copy", targets=this_tables)
    return _Shape("copy")


def _alter_shape(expression: exp.Alter) -> _Shape:
    for action in expression.args.get("actions") or []:
        if isinstance(action, exp.AlterRename):
            return _Shape(
                "rename",
                targets=_as_tables(action.this),
                sources=_as_tables(expression.this),
                reads=False,
            )
    return _Shape("ddl", reads=False)


def _update_shape(expression: exp.Update, dialect: SqlDialect) -> _Shape:
    candidates = _statement_level_tables(expression)
    written = _resolve_alias(expression.this, candidates, dialect)
    target, through_cte = _through_cte(written, dialect)
    return _Shape(
        "update",
        targets=_as_tables(target),
        excluded=_bindings(target, candidates, dialect) + through_cte,
    )


def _delete_shape(expression: exp.Delete, dialect: SqlDialect) -> _Shape:
    candidates = _statement_level_tables(expression)
    named = [t for t in expression.args.get("tables") or [] if isinstance(t, exp.Table)]
    written = named or _as_tables(expression.this)
    targets: list[exp.Expr | None] = []
    excluded: list[exp.Expr] = []
    for table in written:
        target, through_cte = _through_cte(_resolve_alias(table, candidates, dialect), dialect)
        targets.append(target)
        excluded += _bindings(target, candidates, dialect) + through_cte
    tables = [target for target in targets if isinstance(target, exp.Table)]
    return _Shape("delete", targets=tables, excluded=excluded)


def _through_cte(
    node: exp.Expr | None, dialect: SqlDialect
) -> tuple[exp.Expr | None, list[exp.Expr]]:
    """T-SQL ``WITH d AS (SELECT ... FROM t) DELETE FROM d``: the write lands in ``t``.

    Returns the real written table (None when the CTE is not a simple one-table query)
    and the nodes that are bindings rather than reads.
    """
    if not isinstance(node, exp.Table) or node.args.get("db"):
        return node, []
    ref = table_ref(node, dialect)
    if ref is None or not is_cte_reference(node, ref.key, dialect):
        return node, []
    body = cte_body(node, ref.key, dialect)
    from_ = body.args.get("from_") if isinstance(body, exp.Select) else None
    base = from_.this if isinstance(from_, exp.From) else None
    if isinstance(body, exp.Select) and isinstance(base, exp.Table) and not body.args.get("joins"):
        return base, [node, base]
    return None, [node]


def cte_body(table: exp.Expr, key: str, dialect: SqlDialect) -> exp.Expr | None:
    """The query of the CTE named ``key`` visible from ``table``, if any."""
    node = table.parent
    while node is not None:
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            for cte in with_.expressions:
                alias = cte.args.get("alias")
                named = isinstance(alias, exp.TableAlias) and isinstance(alias.this, exp.Identifier)
                if named and name_key(alias.this, dialect) == key:
                    body: exp.Expr = cte.this
                    return body
        node = node.parent
    return None


def resolve_update_target(
    expression: exp.Update | exp.Delete, dialect: SqlDialect
) -> exp.Expr | None:
    """The table node an UPDATE really writes (T-SQL ``UPDATE alias ... FROM t alias``)."""
    written = _resolve_alias(expression.this, _statement_level_tables(expression), dialect)
    return _through_cte(written, dialect)[0]


def _statement_level_tables(expression: exp.Expr) -> list[exp.Table]:
    tables = expression.find_all(exp.Table)
    return [table for table in tables if not _in_subquery(table, expression)]


def _in_subquery(node: exp.Expr, root: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None and parent is not root:
        if isinstance(parent, (exp.Query, exp.Subquery)):
            return True
        parent = parent.parent
    return False


def _resolve_alias(
    node: exp.Expr | None, candidates: list[exp.Table], dialect: SqlDialect
) -> exp.Expr | None:
    if not isinstance(node, exp.Table) or node.args.get("db") or node.alias:
        return node
    wanted = name_key(node.name, dialect)
    for table in candidates:
        if table is not node and table.alias and name_key(table.alias, dialect) == wanted:
            return table
    return node


def _bindings(
    target: exp.Expr | None, candidates: list[exp.Table], dialect: SqlDialect
) -> list[exp.Expr]:
    """Statement-level occurrences of the written table (not reads of it)."""
    if not isinstance(target, exp.Table):
        return []
    target_ref = table_ref(target, dialect)
    bound: list[exp.Expr] = []
    for table in candidates:
        ref = table_ref(table, dialect)
        same_table = ref is not None and target_ref is not None and ref.key == target_ref.key
        bare = not table.args.get("db") and not table.alias
        alias_only = bare and _aliases(target, table, dialect)
        if table is target or same_table or alias_only:
            bound.append(table)
    return bound


def _aliases(target: exp.Table, table: exp.Table, dialect: SqlDialect) -> bool:
    return bool(target.alias) and name_key(target.alias, dialect) == name_key(table.name, dialect)


# -- reads ------------------------------------------------------------------------------


def _source_tables(
    tables: list[exp.Table], excluded: set[int], dialect: SqlDialect
) -> list[TableRef]:
    path_roots = _path_roots(tables, dialect)
    refs: list[TableRef] = []
    for table in tables:
        if id(table) in excluded or table.find_ancestor(*_NOT_SOURCES):
            continue
        ref = table_ref(table, dialect)
        if ref is None:
            continue
        if not table.args.get("db") and is_cte_reference(table, ref.key, dialect):
            continue
        if _is_path(table, path_roots, dialect):
            continue
        refs.append(ref)
    return refs


def is_cte_reference(table: exp.Table, key: str, dialect: SqlDialect) -> bool:
    """True when an unqualified table name refers to a CTE visible at that point."""
    child: exp.Expr = table
    node = table.parent
    while node is not None:
        if isinstance(node, exp.With):
            if _visible_in_with(node, child, key, dialect):
                return True
        else:
            with_ = node.args.get("with_")
            if (
                isinstance(with_, exp.With)
                and with_ is not child
                and key in _cte_keys(with_.expressions, dialect)
            ):
                return True
        child, node = node, node.parent
    return False


def _visible_in_with(with_: exp.With, child: exp.Expr, key: str, dialect: SqlDialect) -> bool:
    ctes = list(with_.expressions)
    position = next((i for i, cte in enumerate(ctes) if cte is child), None)
    if position is None:
        return False
    if key in _cte_keys(ctes[:position], dialect):
        return True
    own = ctes[position]
    own_key = name_key(own.args["alias"].this, dialect) if own.args.get("alias") else ""
    recursive = bool(with_.args.get("recursive")) or isinstance(own.this, exp.SetOperation)
    return recursive and own_key == key


def _cte_keys(ctes: list[exp.Expr], dialect: SqlDialect) -> set[str]:
    keys: set[str] = set()
    for cte in ctes:
        alias = cte.args.get("alias")
        if isinstance(alias, exp.TableAlias) and isinstance(alias.this, exp.Identifier):
            keys.add(name_key(alias.this, dialect))
    return keys


def _path_roots(tables: list[exp.Table], dialect: SqlDialect) -> set[str]:
    if dialect.name not in _PATH_DIALECTS:
        return set()
    return {name_key(table.alias_or_name, dialect) for table in tables}


def _is_path(table: exp.Table, roots: set[str], dialect: SqlDialect) -> bool:
    """BigQuery/Redshift ``FROM t, t.array_column``: an array path, not a table."""
    db = table.args.get("db")
    if not roots or table.args.get("catalog") or not isinstance(db, exp.Identifier):
        return False
    return name_key(db, dialect) in roots and bool(table.find_ancestor(exp.Join))
