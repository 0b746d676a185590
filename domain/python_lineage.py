"""Lineage of a Python file, read with ``ast`` (pure: nothing is imported or run).

Recognised:

- SQL run from Python: ``spark.sql(q)`` (any ``.sql(q)``), ``pd.read_sql(q, con)``,
  ``read_sql_query``, ``cursor.execute(q)`` / ``executemany`` / ``exec_driver_sql``,
  ``conn.execute(text(q))`` and any SQLAlchemy ``text(q)``; ``q`` may be a literal, a
  constant, an f-string / concatenation / ``%`` / ``.format()`` of constants, ``.strip()`` or
  ``dedent()`` of one; anything else is skipped with a warning.
- Tables by name: ``spark.table(t)``, ``spark.read.table(t)``, ``DeltaTable.forName(spark, t)``,
  ``pd.read_sql_table(t, con, schema=s)`` read; ``df.write.saveAsTable(t)``,
  ``df.write.insertInto(t)``, ``df.writeTo(t)``, ``stream.toTable(t)``,
  ``df.to_sql(t, con, schema=s)``, polars ``write_database(table_name=t)`` write.
- Temporary views: ``df.createOrReplaceTempView(v)`` makes ``v`` stand for what ``df`` was read
  from, in later SQL.
- dbt Python models: ``dbt.ref(m)`` / ``dbt.source(s, t)`` / ``dbt.config(...)``.

Edges are attributed to the enclosing function (node ``path#qualified.name``; module and class
level code to the file). A DataFrame written after being read (``df = spark.table(S)`` ...
``df.write.saveAsTable(T)``) gives ``(T)-[:READS_FROM]->(S)`` via the function (confidence
0.9, ``inferred: dataflow``); a write whose input cannot be followed is paired with every
table the same function reads (confidence 0.8, ``inferred: same_function``). Pairs inside one
SQL statement are exact (confidence 1.0).
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from domain.dbt_jinja import literal
from domain.graph import NodeKind, Rel
from domain.graph_builder import GraphBuilder, Lines
from domain.lineage import SqlLineage, extract_sql_lineage
from domain.sql_graph import SqlEmitter

DATAFLOW_CONFIDENCE = 0.9
SAME_FUNCTION_CONFIDENCE = 0.8

DbtDatasets = Callable[[str, tuple[str, ...], Lines], str | None]
"""(``ref``/``source``, string arguments, lines) -> urn of the dataset a dbt call reads."""

_SQL_START = re.compile(
    r"^\s*(?:(?:--[^\n]*\n|/\*.*?\*/)\s*)*\(?\s*"
    r"(with|select|insert|update|delete|merge|create|replace|drop|alter|truncate|copy|"
    r"call|exec|execute|upsert|unload|values|from|cache|refresh|msck|optimize|vacuum)\b",
    re.IGNORECASE | re.DOTALL,
)
_TABLE_NAME = re.compile(r"^[\w$`\"\[\]\-]+(?:\.[\w$`\"\[\]\-]+){0,3}$")
_READ_SQL = frozenset({"read_sql", "read_sql_query", "read_database"})
_EXECUTE = frozenset({"execute", "executemany", "exec_driver_sql", "executescript"})
_WRITE_METHODS = frozenset({"saveAsTable", "insertInto", "writeTo", "toTable"})
_TEMP_VIEW_METHODS = frozenset(
    {
        "createOrReplaceTempView",
        "createTempView",
        "createOrReplaceGlobalTempView",
        "createGlobalTempView",
        "registerTempTable",
    }
)
_TEXT_MODULES = frozenset(
    {"sqlalchemy", "sa", "sql", "sqlalchemy.sql", "sqlalchemy.sql.expression"}
)
_SQL_KEYWORDS = ("sql", "sqlQuery", "query", "statement", "operation")
_DATABASE_WORDS = frozenset({"cur", "con", "db", "client", "ctx"})
_DATABASE_PREFIXES = (
    "conn",
    "cursor",
    "session",
    "spark",
    "duckdb",
    "engine",
    "sqlcontext",
    "hivecontext",
    "snowflake",
    "bigquery",
    "database",
    "warehouse",
)
_SQL_VARIABLE_WORDS = ("sql", "query", "stmt", "statement", "ddl", "dml")
_SPARK_HINTS = ("spark", "session", "sqlcontext", "hivecontext", ".read", "readstream")


class _TextClause:
    """Marks a variable holding a SQLAlchemy ``text()`` clause (lineage taken where built)."""


_TEXT = _TextClause()
Value = str | _TextClause


@dataclass
class _Facts:
    """What one call does, before it is emitted."""

    sql: list[tuple[str, str, str]] = field(default_factory=list)  # (text, dialect, label)
    reads: list[str] = field(default_factory=list)  # dataset names read by name
    dbt_reads: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)  # dataset names written by name
    temp_view: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Scope:
    name: str | None  # qualified name of a function; None for module/class bodies
    node: ast.AST | None
    env: dict[str, Value] = field(default_factory=dict)
    frames: dict[str, set[str]] = field(default_factory=dict)  # variable -> dataset urns
    is_function: bool = False


@dataclass
class _Owner:
    urn: str
    reads: list[tuple[str, Lines]] = field(default_factory=list)  # (dataset urn, lines)
    loose_writes: list[tuple[str, Lines]] = field(default_factory=list)


class PythonLineage(ast.NodeVisitor):
    """One pass over one Python module."""

    def __init__(
        self,
        builder: GraphBuilder,
        emitter: SqlEmitter,
        dialect: str | None,
        *,
        model_owner: str | None = None,
        dbt_datasets: DbtDatasets | None = None,
        on_config: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.b = builder
        self.emitter = emitter
        self.dialect = dialect
        self.model_owner = model_owner
        self.dbt_datasets = dbt_datasets
        self.on_config = on_config
        self.scopes: list[_Scope] = [_Scope(None, None)]
        self.owners: dict[str, _Owner] = {}
        self._facts: dict[int, _Facts] = {}
        self._sql_cache: dict[tuple[str, str], SqlLineage] = {}

    # -- entry ----------------------------------------------------------------------------

    def run(self, content: str) -> None:
        try:
            tree = ast.parse(content)
        except (SyntaxError, ValueError) as error:
            line = getattr(error, "lineno", None) or 1
            self.b.warn(f"line {line}: not valid Python ({error.__class__.__name__}); skipped")
            return
        except RecursionError:
            self.b.warn("line 1: Python too deeply nested; skipped")
            return
        self.scopes[0].env.update(_module_constants(tree))
        try:
            self.visit(tree)
        except RecursionError:
            self.b.warn("line 1: Python too deeply nested; lineage may be incomplete")
        self._finish()

    # -- scopes ---------------------------------------------------------------------------

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self.visit(default)
        prefix = self._qualname_prefix()
        scope = _Scope(f"{prefix}{node.name}", node, is_function=True)
        self.scopes.append(scope)
        for statement in node.body:
            self.visit(statement)
        self.scopes.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        for base in node.bases:
            self.visit(base)
        prefix = self._qualname_prefix()
        self.scopes.append(_Scope(f"{prefix}{node.name}", node))
        for statement in node.body:
            self.visit(statement)
        self.scopes.pop()

    def _qualname_prefix(self) -> str:
        names = [scope.name for scope in self.scopes if scope.name]
        return names[-1] + "." if names else ""

    def _owner(self) -> _Owner:
        if self.model_owner is not None:
            urn = self.model_owner
        else:
            function = next((s for s in reversed(self.scopes) if s.is_function), None)
            if function is None or function.name is None or function.node is None:
                urn = self.b.file_urn
            else:
                node = function.node
                assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                urn = self.b.node(
                    NodeKind.PYTHON_FUNCTION,
                    f"{self.b.path}#{function.name}",
                    self.b.path,
                    function=function.name,
                    line=node.lineno,
                )
                self.b.edge(Rel.DEFINED_IN, urn, self.b.file_urn, _lines(node), dialect=None)
        if urn not in self.owners:
            self.owners[urn] = _Owner(urn)
        return self.owners[urn]

    def _lookup(self, name: str) -> Value | None:
        for scope in reversed(self.scopes):
            if name in scope.env:
                return scope.env[name]
        return None

    def _frames(self, name: str) -> set[str]:
        for scope in reversed(self.scopes):
            if name in scope.frames:
                return scope.frames[name]
        return set()

    # -- assignments ----------------------------------------------------------------------

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._bind(target, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self._bind(node.target, node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            scope = self.scopes[-1]
            name = node.target.id
            before = self._lookup(name)
            added = self._resolve(node.value)
            if isinstance(node.op, ast.Add) and isinstance(before, str) and added is not None:
                scope.env[name] = before + added
            else:
                scope.env.pop(name, None)
            flows = self._frames(name) | self._sources(node.value)
            if flows:
                scope.frames[name] = flows

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        scope = self.scopes[-1]
        names = [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
        if isinstance(target, ast.Name):
            resolved: Value | None = self._resolve(value)
            if resolved is None and self._is_text_call(value):
                resolved = _TEXT
            if resolved is None:
                scope.env.pop(target.id, None)
            else:
                scope.env[target.id] = resolved
        else:
            for name in names:
                scope.env.pop(name, None)
        flows = self._sources(value)
        for name in names:
            if flows:
                scope.frames[name] = flows
            else:
                scope.frames.pop(name, None)

    # -- calls ----------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        facts = self._classify(node)
        lines = _lines(node)
        for warning in facts.warnings:
            self.b.warn(f"line {node.lineno}: {warning}")
        if not (facts.sql or facts.reads or facts.writes or facts.dbt_reads or facts.temp_view):
            if facts.config and self.on_config is not None:
                self.on_config(facts.config)
            return
        if facts.config and self.on_config is not None:
            self.on_config(facts.config)
        owner = self._owner()
        for text, dialect, label in facts.sql:
            lineage = self._extract(text, dialect)
            context = f"line {node.lineno}: SQL in {label}(): "
            emission = self.emitter.emit(
                lineage, owner.urn, owner_reads_all=True, lines=lines, context=context
            )
            for name, _ in emission.reads:
                owner.reads.append((self.emitter.dataset_urn(name), lines))
            if emission.loaded:
                # `executemany("insert ... values (?, ?)", rows)`: the rows' origin
                flows: set[str] = set()
                for argument in [*node.args[1:], *(kw.value for kw in node.keywords)]:
                    flows |= self._sources(argument)
                for name in emission.loaded:
                    self._write_flows(self.emitter.dataset_urn(name), flows, owner, lines)
        for name in facts.reads:
            urn = self.emitter.dataset_urn(name)
            self.b.edge(Rel.READS_FROM, owner.urn, urn, lines, dialect=None)
            owner.reads.append((urn, lines))
        for function, args in facts.dbt_reads:
            dataset = self.dbt_datasets(function, args, lines) if self.dbt_datasets else None
            if dataset is not None:
                self.b.edge(Rel.READS_FROM, owner.urn, dataset, lines, dialect=None)
                owner.reads.append((dataset, lines))
        if facts.writes or facts.temp_view:
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            flows = self._sources(receiver) if receiver is not None else set()
            if facts.temp_view:
                names = {_dataset_name(urn) for urn in flows}
                self.emitter.register_temp(facts.temp_view, names)
            for name in facts.writes:
                urn = self.emitter.dataset_urn(name)
                self.b.edge(Rel.WRITES_TO, owner.urn, urn, lines, dialect=None)
                self._write_flows(urn, flows, owner, lines)

    def _write_flows(self, target: str, flows: set[str], owner: _Owner, lines: Lines) -> None:
        """``(target)-[:READS_FROM]->(source)`` for the data a write was followed from; a
        write whose data cannot be followed is paired at the end of the file."""
        if not flows:
            owner.loose_writes.append((target, lines))
        for source in sorted(flows):
            self.b.edge(
                Rel.READS_FROM,
                target,
                source,
                lines,
                via=owner.urn,
                dialect=None,
                confidence=DATAFLOW_CONFIDENCE,
                inferred="dataflow",
            )

    def _classify(self, node: ast.Call) -> _Facts:
        key = id(node)
        if key not in self._facts:
            self._facts[key] = self._facts_of(node)
        return self._facts[key]

    def _facts_of(self, node: ast.Call) -> _Facts:
        facts = _Facts()
        func = node.func
        if isinstance(func, ast.Attribute):
            method, receiver = func.attr, ast.unparse(func.value).lower()
        elif isinstance(func, ast.Name):
            method, receiver = func.id, ""
        else:
            return facts
        if method == "sql" and receiver:
            self._sql_argument(node, facts, f"{receiver}.sql", _sql_dialect(receiver), receiver)
        elif method in _READ_SQL:
            self._read_sql(node, facts, method)
        elif method == "read_sql_table":
            self._named(node, facts, facts.reads, method, ("table_name",), schema_at=2)
        elif method in _EXECUTE and receiver:
            self._sql_argument(node, facts, method, self.dialect or "ansi", receiver)
        elif method == "text" and (not receiver or receiver in _TEXT_MODULES):
            text = self._resolve(_argument(node, 0, ("text",)))
            if text is not None and _SQL_START.match(text):
                facts.sql.append((text, self.dialect or "ansi", "text"))
        elif method == "table" and any(hint in receiver for hint in _SPARK_HINTS):
            self._named(node, facts, facts.reads, method, ("tableName",), spark=True)
        elif method == "forName" and receiver.endswith("deltatable"):
            self._named(node, facts, facts.reads, method, ("tableOrViewName",), index=1, spark=True)
        elif method in _WRITE_METHODS and receiver:
            self._named(node, facts, facts.writes, method, ("name", "tableName"), spark=True)
        elif method == "to_sql" and receiver:
            self._named(node, facts, facts.writes, method, ("name",), schema_at=2)
        elif method == "write_database" and receiver:
            self._named(node, facts, facts.writes, method, ("table_name",))
        elif method in _TEMP_VIEW_METHODS and receiver:
            name = self._resolve(_argument(node, 0, ("name", "viewName")))
            if name is not None:
                facts.temp_view = name
        elif receiver == "dbt" and method in {"ref", "source"}:
            args = [self._resolve(arg) for arg in node.args]
            if all(isinstance(arg, str) for arg in args) and args:
                facts.dbt_reads.append((method, tuple(str(arg) for arg in args)))
            else:
                facts.warnings.append(f"dbt.{method}() with non-constant arguments skipped")
        elif receiver == "dbt" and method == "config":
            facts.config = {kw.arg: literal(kw.value) for kw in node.keywords if kw.arg is not None}
        return facts

    def _sql_argument(
        self, node: ast.Call, facts: _Facts, label: str, dialect: str, receiver: str
    ) -> None:
        """SQL text passed to ``.sql()``/``.execute()``; warnings only when the receiver or the
        argument look like a database call (``self.sql(node)`` in a SQL generator is not)."""
        database = _database_like(receiver)
        argument = _argument(node, 0, _SQL_KEYWORDS)
        if argument is None or self._is_text_call(argument):
            return
        if isinstance(argument, ast.Name) and self._lookup(argument.id) is _TEXT:
            return
        text = self._resolve(argument)
        if text is None:
            if database or _looks_like_sql_source(argument):
                facts.warnings.append(f"SQL passed to {label}() is not a constant string; skipped")
            return
        if _SQL_START.match(text):  # PRAGMA, SHOW, SET, BEGIN... carry no lineage
            facts.sql.append((text, dialect, label))

    def _read_sql(self, node: ast.Call, facts: _Facts, method: str) -> None:
        argument = _argument(node, 0, _SQL_KEYWORDS)
        if argument is None or self._is_text_call(argument):
            return
        if isinstance(argument, ast.Name) and self._lookup(argument.id) is _TEXT:
            return
        text = self._resolve(argument)
        if text is None:
            facts.warnings.append(f"SQL passed to {method}() is not a constant string; skipped")
        elif _SQL_START.match(text):
            facts.sql.append((text, self.dialect or "ansi", method))
        elif _TABLE_NAME.match(text.strip()):
            # pandas.read_sql falls back to read_sql_table for a bare table name
            facts.reads.append(self._table(text.strip(), self.dialect))
        else:
            facts.warnings.append(f"text passed to {method}() does not look like SQL; skipped")

    def _named(
        self,
        node: ast.Call,
        facts: _Facts,
        into: list[str],
        method: str,
        keywords: tuple[str, ...],
        *,
        index: int = 0,
        schema_at: int | None = None,
        spark: bool = False,
    ) -> None:
        text = self._resolve(_argument(node, index, keywords))
        if text is None:
            facts.warnings.append(f"table name passed to {method}() is not a constant; skipped")
            return
        name = text.strip()
        if schema_at is not None:
            schema = self._resolve(_argument(node, schema_at, ("schema",)))
            if schema:
                name = f"{schema.strip()}.{name}"
        if not _TABLE_NAME.match(name):
            facts.warnings.append(f"{name!r} passed to {method}() is not a table name; skipped")
            return
        dialect = self.dialect or ("spark" if spark else "ansi")
        into.append(self._table(name, dialect))

    # -- values ---------------------------------------------------------------------------

    def _resolve(self, node: ast.expr | None) -> str | None:
        """The string an expression always evaluates to, when it can be told statically."""
        return _resolve(node, self._lookup)

    def _is_text_call(self, node: ast.expr | None) -> bool:
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Name):
            return func.id == "text"
        if isinstance(func, ast.Attribute):
            return func.attr == "text" and ast.unparse(func.value).lower() in _TEXT_MODULES
        return False

    def _sources(self, node: ast.expr | None) -> set[str]:
        """Dataset urns an expression's value is computed from (DataFrame data flow)."""
        if node is None:
            return set()
        found: set[str] = set()
        for child in ast.walk(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
                found |= self._frames(child.id)
            elif isinstance(child, ast.Call):
                facts = self._classify(child)
                found |= {self.emitter.dataset_urn(name) for name in facts.reads}
                for text, dialect, _ in facts.sql:
                    lineage = self._extract(text, dialect)
                    if lineage.targets:
                        continue
                    for name in lineage.sources:
                        if self.emitter.is_temp(name):
                            found |= {
                                self.emitter.dataset_urn(real)
                                for real in self.emitter.temp_sources.get(name.lower(), set())
                            }
                        else:
                            found.add(self.emitter.dataset_urn(name))
                if self.dbt_datasets is not None:
                    for function, args in facts.dbt_reads:
                        dataset = self.dbt_datasets(function, args, _lines(child))
                        if dataset is not None:
                            found.add(dataset)
        return found

    def _extract(self, text: str, dialect: str) -> SqlLineage:
        key = (text, dialect)
        if key not in self._sql_cache:
            self._sql_cache[key] = extract_sql_lineage(text, dialect)
        return self._sql_cache[key]

    def _table(self, name: str, dialect: str | None) -> str:
        """A table name as the SQL extractor would report it (case and quotes)."""
        try:
            found = self._extract(f"SELECT * FROM {name}", dialect or "ansi").sources
        except ValueError:
            found = []
        if len(found) == 1:
            return found[0]
        return name.replace("`", "").replace('"', "").lower()

    # -- end ------------------------------------------------------------------------------

    def _finish(self) -> None:
        """A write whose input could not be followed: paired with everything the same
        process reads."""
        for owner in self.owners.values():
            for target, lines in owner.loose_writes:
                for source, _ in owner.reads:
                    self.b.edge(
                        Rel.READS_FROM,
                        target,
                        source,
                        lines,
                        via=owner.urn,
                        dialect=None,
                        confidence=SAME_FUNCTION_CONFIDENCE,
                        inferred="same_function",
                    )


# -- helpers ----------------------------------------------------------------------------------


def _dataset_name(urn: str) -> str:
    """The dataset name inside a dataset urn (``urn:li:dataset:project:name``)."""
    return urn.split(":", 4)[-1]


def _lines(node: ast.AST) -> Lines:
    start = int(getattr(node, "lineno", 1) or 1)
    end = getattr(node, "end_lineno", None)
    return start, int(end) if end else start


def _argument(node: ast.Call, index: int, keywords: tuple[str, ...]) -> ast.expr | None:
    for keyword in node.keywords:
        if keyword.arg in keywords:
            return keyword.value
    if len(node.args) > index and not isinstance(node.args[index], ast.Starred):
        return node.args[index]
    return None


def _sql_dialect(receiver: str) -> str:
    if "spark" in receiver or "sqlcontext" in receiver or "hivecontext" in receiver:
        return "spark"
    if "duckdb" in receiver:
        return "duckdb"
    return "ansi"


def _database_like(receiver: str) -> bool:
    """``cursor``, ``self.db_conn``, ``spark``... (the receiver of ``.sql()``/``.execute()``)."""
    words = re.findall(r"[a-z]+", receiver)
    return any(w in _DATABASE_WORDS or w.startswith(_DATABASE_PREFIXES) for w in words)


def _looks_like_sql_source(node: ast.expr) -> bool:
    """An unresolvable argument worth a warning: built from strings that look like SQL."""
    for child in ast.walk(node):
        if (
            isinstance(child, ast.Constant)
            and isinstance(child.value, str)
            and _SQL_START.match(child.value)
        ):
            return True
    if isinstance(node, ast.Name):
        return any(word in node.id.lower() for word in _SQL_VARIABLE_WORDS)
    return False


def _resolve(node: ast.expr | None, lookup: Callable[[str], Value | None]) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        found = lookup(node.id)
        return found if isinstance(found, str) else None
    if isinstance(node, ast.JoinedStr):
        parts: list[str] = []
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                parts.append(part.value)
            elif isinstance(part, ast.FormattedValue) and part.format_spec is None:
                inner = _resolve_scalar(part.value, lookup)
                if inner is None:
                    return None
                parts.append(inner)
            else:
                return None
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _resolve(node.left, lookup), _resolve(node.right, lookup)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _percent(node, lookup)
    if isinstance(node, ast.Call):
        return _resolve_call(node, lookup)
    return None


def _resolve_scalar(node: ast.expr, lookup: Callable[[str], Value | None]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return str(node.value)
    return _resolve(node, lookup)


def _percent(node: ast.BinOp, lookup: Callable[[str], Value | None]) -> str | None:
    template = _resolve(node.left, lookup)
    if template is None:
        return None
    items = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
    values = [_resolve_scalar(item, lookup) for item in items]
    if any(value is None for value in values):
        return None
    try:
        return template % tuple(values)
    except (TypeError, ValueError, KeyError):
        return None


def _resolve_call(node: ast.Call, lookup: Callable[[str], Value | None]) -> str | None:
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in {"strip", "lstrip", "rstrip"}:
        if not node.args:
            inner = _resolve(func.value, lookup)
            if inner is not None:
                return str(getattr(inner, func.attr)())
        return None
    if isinstance(func, ast.Attribute) and func.attr == "format":
        template = _resolve(func.value, lookup)
        if template is None:
            return None
        args = [_resolve_scalar(arg, lookup) for arg in node.args]
        kwargs = {kw.arg: _resolve_scalar(kw.value, lookup) for kw in node.keywords}
        if any(value is None for value in args) or any(
            key is None or value is None for key, value in kwargs.items()
        ):
            return None
        try:
            return template.format(*args, **{str(k): v for k, v in kwargs.items()})
        except (IndexError, KeyError, ValueError):
            return None
    is_dedent = (isinstance(func, ast.Name) and func.id == "dedent") or (
        isinstance(func, ast.Attribute) and func.attr == "dedent"
    )
    if is_dedent and len(node.args) == 1:
        inner = _resolve(node.args[0], lookup)
        return textwrap.dedent(inner) if inner is not None else None
    return None


def _module_constants(tree: ast.Module) -> dict[str, Value]:
    """Module-level string constants, so functions defined above them still see them.
    A name bound to different values is left out."""
    found: dict[str, Value] = {}
    conflicting: set[str] = set()

    def lookup(name: str) -> Value | None:
        return found.get(name)

    for statement in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        for target in targets:
            if not isinstance(target, ast.Name):
                continue
            resolved = _resolve(value, lookup)
            if resolved is None or (target.id in found and found[target.id] != resolved):
                conflicting.add(target.id)
            else:
                found[target.id] = resolved
    return {name: item for name, item in found.items() if name not in conflicting}
