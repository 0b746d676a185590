"""One file of a repository -> lineage graph nodes and edges (pure, no I/O).

:func:`extract_file_lineage` dispatches on the file:

- plain ``.sql``: per statement, ``(T)-[:READS_FROM]->(S)`` via the file (or the stored
  procedure holding the statement), ``(file)-[:WRITES_TO]->(T)``, ``(file)-[:READS_FROM]->(S)``
  for statements without a target, ``(T)-[:DEFINED_IN]->(file)`` for created tables/views and
  ``(target_col)-[:DERIVES]->(source_col)`` (see :mod:`domain.sql_graph`);
- dbt models/snapshots (``.sql`` under the project's model/snapshot paths, or any ``.sql``
  using ``ref()``/``source()`` when no project is known): ``(model)-[:READS_FROM]->(ref or
  source)`` for every call found in the Jinja, whatever the SQL parser makes of the rendered
  text, column lineage when it parses, config as node properties;
- dbt properties YAML: sources, models, seeds and their columns with descriptions;
- dbt seeds (``.csv`` under the seed paths): the seed and its header's columns;
- ``.py``: see :mod:`domain.python_lineage` (dbt Python models included);
- anything else: the FILE node alone.

Dataset names: a ``ref('m')`` is the dataset named ``m`` (an alias is a property: whether a
ref could see it would depend on ingest order, and the model would split in two); a
``source('s', 't')`` is ``s.t``; plain SQL tables are named as the SQL extractor reports them
(lower-cased unless quoted). Datasets share one URN type, so ``ref('stg_orders')`` and
``select ... from stg_orders`` are one node; ``from analytics.stg_orders`` is another.
"""

from __future__ import annotations

import csv
import io
import posixpath
import re
from typing import Any

from domain import dbt_yaml
from domain.dbt import PROJECT_FILE, DbtProject
from domain.dbt_jinja import PLACEHOLDER, DbtCall, JinjaScan, scan_jinja
from domain.graph import FileLineage, NodeKind, Rel
from domain.graph_builder import GraphBuilder, Lines
from domain.lineage import SqlLineage, StatementLineage, UnknownDialect, extract_sql_lineage
from domain.python_lineage import PythonLineage
from domain.sql_graph import KEYWORD_SCAN_CONFIDENCE, SqlEmitter, column_part, table_of

MODEL_PLACEHOLDER = "__dbt_model__"
"""The relation a dbt model builds while its SQL is parsed (also what ``{{ this }}`` becomes)."""

_YAML_EXTENSIONS = (".yml", ".yaml")
_DBT_YAML_NAMES = frozenset({PROJECT_FILE, "schema.yml", "sources.yml", "schema.yaml"})
_DBT_CALL = re.compile(r"\{\{-?\s*(ref|source)\s*\(")
_IDENTIFIER = re.compile(r"^[A-Za-z_][\w$]*(\.[A-Za-z_][\w$]*)*$")
_AMBIGUOUS = re.compile(r"^(.*ambiguous unqualified column\(s\) not attributed: )(.*)$")
_FIRST_TOKEN = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/)*", re.DOTALL)
_WRAPPABLE = re.compile(r"(with|select|\()", re.IGNORECASE)
_TEST_KEYS = ("tests", "data_tests")


def extract_file_lineage(
    path: str,
    content: str,
    project_id: str,
    *,
    dialect: str | None = None,
    dbt: DbtProject | None = None,
) -> FileLineage:
    """What one file contributes to the lineage graph. Never raises for bad content: what
    cannot be read is reported in ``warnings`` and the FILE node is always there.

    Args:
        path: the repository-relative path (the evidence every edge points at).
        content: the file's text.
        project_id: the project the nodes belong to.
        dialect: SQL dialect (see :data:`domain.lineage.SUPPORTED_DIALECTS`); an unknown one
            is reported as a warning and ANSI is used.
        dbt: the dbt project the file may belong to (see :func:`domain.dbt.find_dbt_projects`).
    """
    canonical, dialect_warning = _dialect(dialect)
    builder = GraphBuilder(project_id, path, canonical)
    if dialect_warning:
        builder.warn(dialect_warning)
    try:
        _dispatch(builder, path, content, None if dialect_warning else dialect, dbt)
    except RecursionError:
        builder.warn("lineage extraction stopped: input too deeply nested")
    except Exception as error:  # pure code on arbitrary input: never lose the file
        builder.warn(f"lineage extraction failed ({type(error).__name__}: {str(error)[:200]})")
    return builder.build()


def _dialect(dialect: str | None) -> tuple[str, str | None]:
    try:
        return extract_sql_lineage("", dialect).dialect, None
    except UnknownDialect as error:
        return "ansi", f"{error}; ANSI used"


def _dispatch(
    b: GraphBuilder, path: str, content: str, dialect: str | None, dbt: DbtProject | None
) -> None:
    lowered = path.lower()
    name = posixpath.basename(lowered)
    in_project = dbt is not None and dbt.contains(path)
    if lowered.endswith(".sql"):
        b.node(NodeKind.FILE, path, path, language="sql")
        if dbt is not None and in_project:
            if dbt.is_model_file(path) or dbt.is_snapshot_file(path):
                _DbtModel(b, path, content, dialect, dbt).run()
            elif dbt.is_macro_file(path):
                b.node(NodeKind.FILE, path, path, dbt="macro")
            else:  # analyses, singular tests: the file itself reads the refs
                _DbtModel(b, path, content, dialect, dbt, owner_is_file=True).run()
        elif _DBT_CALL.search(content):
            _DbtModel(b, path, content, dialect, None).run()
        else:
            _plain_sql(b, content, dialect)
    elif lowered.endswith(".py"):
        b.node(NodeKind.FILE, path, path, language="python")
        if dbt is not None and in_project and dbt.is_model_file(path):
            _python_model(b, path, content, dialect, dbt)
        else:
            PythonLineage(b, SqlEmitter(b), dialect).run(content)
    elif lowered.endswith(_YAML_EXTENSIONS):
        b.node(NodeKind.FILE, path, path, language="yaml")
        if in_project or name in _DBT_YAML_NAMES or _looks_like_dbt_yaml(content):
            _DbtYaml(b, path, content, dbt).run()
    elif dbt is not None and in_project and dbt.is_seed_file(path):
        b.node(NodeKind.FILE, path, path, language="csv")
        _seed(b, path, content)


# -- plain SQL --------------------------------------------------------------------------------


def _plain_sql(b: GraphBuilder, content: str, dialect: str | None) -> None:
    lineage = extract_sql_lineage(content, dialect)
    SqlEmitter(b).emit(lineage, b.file_urn, owner_reads_all=False)


# -- dbt SQL models ---------------------------------------------------------------------------


class _DbtModel:
    """A dbt model or snapshot (or, with ``owner_is_file``, an analysis/test that reads refs)."""

    def __init__(
        self,
        b: GraphBuilder,
        path: str,
        content: str,
        dialect: str | None,
        dbt: DbtProject | None,
        *,
        owner_is_file: bool = False,
    ) -> None:
        self.b = b
        self.path = path
        self.content = content
        self.dialect = dialect
        self.dbt = dbt
        self.owner_is_file = owner_is_file
        self.known: dict[str, str] = {}  # rendered relation name -> dataset urn
        self.model_name = posixpath.splitext(posixpath.basename(path))[0].lower()

    def run(self) -> None:
        scan = scan_jinja(self.content, self._render, MODEL_PLACEHOLDER)
        for warning in scan.warnings:
            self.b.warn(warning)
        owner = self.b.file_urn if self.owner_is_file else self._model_node(scan)
        self._calls(scan.calls, owner)
        self._sql(scan, owner)

    # -- names --------------------------------------------------------------------------------

    def _render(self, call: DbtCall) -> str:
        name = self._relation(call)[1]
        return name if _IDENTIFIER.match(name) else PLACEHOLDER

    def _relation(self, call: DbtCall) -> tuple[NodeKind, str]:
        if call.function == "source":
            return NodeKind.DBT_SOURCE, f"{call.args[0]}.{call.args[1]}".lower()
        model = call.model
        if self.dbt is None:
            return NodeKind.DBT_MODEL, model.lower()
        kind = NodeKind.DBT_SEED if self.dbt.is_seed(model) else NodeKind.DBT_MODEL
        return kind, self.dbt.relation_name(model)

    def _dataset(self, call: DbtCall) -> str:
        kind, name = self._relation(call)
        if call.function == "source":
            urn = self.b.node(kind, name, None, source_name=call.args[0], table_name=call.args[1])
        elif kind == NodeKind.DBT_SEED:
            path = self.dbt.seeds.get(call.model) if self.dbt else None
            urn = self.b.node(kind, name, path, seed_name=call.model)
        else:
            path = self.dbt.model_path(call.model) if self.dbt else None
            urn = self.b.node(kind, name, path, model_name=call.model, package=call.package)
        self.known[name] = urn
        return urn

    def _model_node(self, scan: JinjaScan) -> str:
        dbt = self.dbt
        stem = posixpath.splitext(posixpath.basename(self.path))[0]
        model = scan.snapshot or (dbt.model_name_for(self.path) if dbt else None) or stem
        properties: dict[str, Any] = dict(dbt.config_for(self.path)) if dbt else {}
        properties.update(scan.config)
        name = dbt.relation_name(model) if dbt else model.lower()
        default = "snapshot" if scan.snapshot else "view"
        properties.setdefault("materialized", default)
        properties.update(
            model_name=model,
            resource_type="snapshot" if scan.snapshot else "model",
            package=dbt.name if dbt else None,
            language="sql",
            inferred=None if dbt else True,
        )
        urn = self.b.node(NodeKind.DBT_MODEL, name, self.path, **properties)
        self.known[MODEL_PLACEHOLDER] = urn
        self.model_name = name
        self.b.edge(Rel.DEFINED_IN, urn, self.b.file_urn, (1, _line_count(self.content)))
        return urn

    # -- edges --------------------------------------------------------------------------------

    def _calls(self, calls: tuple[DbtCall, ...], owner: str) -> None:
        grouped: dict[str, list[DbtCall]] = {}
        for call in calls:
            grouped.setdefault(self._dataset(call), []).append(call)
        for dataset, found in grouped.items():
            first = next((call for call in found if not call.conditional), found[0])
            hint = all(call.depends_on for call in found)
            self.b.edge(
                Rel.READS_FROM,
                owner,
                dataset,
                (first.line_start, first.line_end),
                conditional=all(call.conditional for call in found),
                dbt_call=first.function,
                depends_on_hint=True if hint else None,
            )
            for call in found:
                if call is not first:
                    self.b.edge(
                        Rel.READS_FROM,
                        owner,
                        dataset,
                        (call.line_start, call.line_end),
                        conditional=call.conditional,
                    )

    def _sql(self, scan: JinjaScan, owner: str) -> None:
        lineage = self._parse(scan.rendered)
        if lineage is None:
            return
        if _unparsed(lineage):
            # A macro alone on its line may be a clause (`{{ limit_in_dev() }}`), not a value.
            second = scan_jinja(
                self.content, self._render, MODEL_PLACEHOLDER, blank_standalone=True
            )
            retry = self._parse(second.rendered) if second.rendered != scan.rendered else None
            if retry is not None and _unparsed(retry) < _unparsed(lineage):
                lineage = retry
        for warning in lineage.warnings:
            cleaned = self._clean_warning(warning)
            if cleaned:
                self.b.warn(cleaned)
        for statement in _leaves(lineage.statements):
            self._statement(statement, owner, lineage)

    def _parse(self, rendered: str) -> SqlLineage | None:
        first = _FIRST_TOKEN.match(rendered)
        body = rendered[first.end() if first else 0 :]
        if not body.strip() or body.startswith(PLACEHOLDER):
            # empty, or the whole model is one macro call (`{{ union_relations(...) }}`):
            # its refs were collected from the Jinja, there is no SQL to parse
            return None
        if not self.owner_is_file:
            rendered = _wrap(rendered)
        return extract_sql_lineage(rendered, self.dialect)

    def _statement(self, statement: StatementLineage, owner: str, lineage: SqlLineage) -> None:
        lines: Lines = (statement.line_start, statement.line_end)
        scanned = statement.kind == "unparsed"
        for name in statement.sources:
            if name in self.known or PLACEHOLDER in name or name == MODEL_PLACEHOLDER:
                continue
            if name not in lineage.sources:
                continue  # temporary table of the model's own SQL
            if scanned and "." not in name:
                continue  # a keyword scan also finds CTE names; those are never dotted
            urn = self.b.node(NodeKind.TABLE, name)
            self.known[name] = urn
            self.b.edge(
                Rel.READS_FROM,
                owner,
                urn,
                lines,
                confidence=KEYWORD_SCAN_CONFIDENCE if scanned else 1.0,
                method="keyword_scan" if scanned else "sql",
            )
        if self.owner_is_file:
            return
        for edge in statement.columns:
            target_table, source_table = table_of(edge.target), table_of(edge.source)
            if target_table != MODEL_PLACEHOLDER or source_table == MODEL_PLACEHOLDER:
                continue
            if PLACEHOLDER in edge.source or PLACEHOLDER in edge.target:
                continue
            target = self._column(self.model_name, column_part(edge.target))
            source = self._column(source_table, column_part(edge.source))
            self.b.edge(Rel.DERIVES, target, source, lines)

    def _column(self, table: str, column: str) -> str:
        name = f"{table}.{column}"
        return self.b.node(NodeKind.COLUMN, name, None, table=table, column=column)

    def _clean_warning(self, warning: str) -> str | None:
        ambiguous = _AMBIGUOUS.match(warning)
        if ambiguous:
            names = [n for n in ambiguous.group(2).split(", ") if PLACEHOLDER not in n]
            if not names:
                return None
            warning = ambiguous.group(1) + ", ".join(names)
        return warning.replace(MODEL_PLACEHOLDER, self.model_name).replace(PLACEHOLDER, "<jinja>")


def _wrap(rendered: str) -> str:
    """Make the model's SELECT a CREATE TABLE AS so that column lineage is computed; the
    prefix goes on the line of the first token, keeping line numbers."""
    start = _FIRST_TOKEN.match(rendered)
    position = start.end() if start else 0
    if not _WRAPPABLE.match(rendered, position):
        return rendered
    prefix = f"create table {MODEL_PLACEHOLDER} as "
    return rendered[:position] + prefix + rendered[position:]


def _unparsed(lineage: SqlLineage) -> int:
    return sum(1 for statement in _leaves(lineage.statements) if statement.kind == "unparsed")


def _leaves(statements: list[StatementLineage]) -> list[StatementLineage]:
    found: list[StatementLineage] = []
    for statement in statements:
        found += _leaves(statement.children) if statement.children else [statement]
    return found


# -- dbt Python models ------------------------------------------------------------------------


def _python_model(
    b: GraphBuilder, path: str, content: str, dialect: str | None, dbt: DbtProject
) -> None:
    model = dbt.model_name_for(path) or posixpath.splitext(posixpath.basename(path))[0]
    properties: dict[str, Any] = dict(dbt.config_for(path))
    properties.setdefault("materialized", "table")
    urn = b.node(
        NodeKind.DBT_MODEL,
        dbt.relation_name(model),
        path,
        model_name=model,
        resource_type="model",
        package=dbt.name,
        language="python",
        **properties,
    )
    b.edge(Rel.DEFINED_IN, urn, b.file_urn, (1, _line_count(content)))

    def datasets(function: str, args: tuple[str, ...], lines: Lines) -> str | None:
        if function == "source" and len(args) == 2:
            name = f"{args[0]}.{args[1]}".lower()
            return b.node(NodeKind.DBT_SOURCE, name, None, source_name=args[0], table_name=args[1])
        if function == "ref" and 1 <= len(args) <= 2:
            model_name = args[-1]
            if dbt.is_seed(model_name):
                return b.node(NodeKind.DBT_SEED, dbt.relation_name(model_name), None)
            return b.node(
                NodeKind.DBT_MODEL,
                dbt.relation_name(model_name),
                dbt.model_path(model_name),
                model_name=model_name,
            )
        b.warn(f"line {lines[0]}: dbt.{function}() with unexpected arguments")
        return None

    def configure(config: dict[str, Any]) -> None:
        b.node(NodeKind.DBT_MODEL, dbt.relation_name(model), path, **config)

    PythonLineage(
        b, SqlEmitter(b), dialect, model_owner=urn, dbt_datasets=datasets, on_config=configure
    ).run(content)


# -- dbt YAML ---------------------------------------------------------------------------------


class _DbtYaml:
    """Sources, models, snapshots and seeds declared in a dbt properties file."""

    def __init__(self, b: GraphBuilder, path: str, content: str, dbt: DbtProject | None) -> None:
        self.b = b
        self.path = path
        self.content = content
        self.dbt = dbt

    def run(self) -> None:
        try:
            root = dbt_yaml.compose(self.content)
        except dbt_yaml.YamlError as error:
            self.b.warn(f"not valid YAML ({error}); skipped")
            return
        if root is None:
            return
        if posixpath.basename(self.path) == PROJECT_FILE:
            name = dbt_yaml.text(dbt_yaml.get(root, "name"))
            self.b.node(NodeKind.FILE, self.path, self.path, dbt_project=name)
            return
        for source in dbt_yaml.seq(dbt_yaml.get(root, "sources")):
            self._source(source)
        for key in ("models", "snapshots"):
            for entry in dbt_yaml.seq(dbt_yaml.get(root, key)):
                self._model(entry, key)
        for entry in dbt_yaml.seq(dbt_yaml.get(root, "seeds")):
            self._seed(entry)

    def _source(self, source: dbt_yaml.YamlNode) -> None:
        source_name = dbt_yaml.text(dbt_yaml.get(source, "name"))
        if not source_name:
            self.b.warn(f"line {dbt_yaml.lines(source)[0]}: source without a name skipped")
            return
        shared = {
            "schema": dbt_yaml.text(dbt_yaml.get(source, "schema")) or source_name,
            "database": dbt_yaml.text(dbt_yaml.get(source, "database")),
            "loader": dbt_yaml.text(dbt_yaml.get(source, "loader")),
            "source_description": dbt_yaml.text(dbt_yaml.get(source, "description")),
            "loaded_at_field": dbt_yaml.text(dbt_yaml.get(source, "loaded_at_field")),
            "freshness": dbt_yaml.value(dbt_yaml.get(source, "freshness")),
            "tags": dbt_yaml.value(dbt_yaml.get(source, "tags")),
            "meta": dbt_yaml.value(dbt_yaml.get(source, "meta")),
        }
        for table in dbt_yaml.seq(dbt_yaml.get(source, "tables")):
            table_name = dbt_yaml.text(dbt_yaml.get(table, "name"))
            if not table_name:
                continue
            properties = {key: value for key, value in shared.items() if value is not None}
            for key in ("loaded_at_field", "identifier", "description"):
                found = dbt_yaml.text(dbt_yaml.get(table, key))
                if found is not None:
                    properties[key] = found
            for key in ("freshness", "tags", "meta", "external"):
                found_value = dbt_yaml.value(dbt_yaml.get(table, key))
                if found_value is not None:
                    properties[key] = found_value
            identifier = properties.get("identifier") or table_name
            properties["relation"] = f"{properties['schema']}.{identifier}"
            name = f"{source_name}.{table_name}".lower()
            lines = dbt_yaml.lines(table)
            urn = self.b.node(
                NodeKind.DBT_SOURCE,
                name,
                self.path,
                source_name=source_name,
                table_name=table_name,
                **properties,
            )
            self.b.edge(Rel.DEFINED_IN, urn, self.b.file_urn, lines)
            self._columns(table, name, defined_here=True)

    def _model(self, entry: dbt_yaml.YamlNode, key: str) -> None:
        model = dbt_yaml.text(dbt_yaml.get(entry, "name"))
        if not model:
            return
        config = dbt_yaml.value(dbt_yaml.get(entry, "config"))
        config = config if isinstance(config, dict) else {}
        name = self.dbt.relation_name(model) if self.dbt else model.lower()
        path = self.dbt.model_path(model) if self.dbt else None
        lines = dbt_yaml.lines(entry)
        self.b.node(
            NodeKind.DBT_MODEL,
            name,
            path,
            model_name=model,
            resource_type="snapshot" if key == "snapshots" else "model",
            description=dbt_yaml.text(dbt_yaml.get(entry, "description")),
            documented_in=self.path,
            documented_at=list(lines),
            **{k: v for k, v in config.items() if v is not None},
        )
        self._columns(entry, name, defined_here=False)

    def _seed(self, entry: dbt_yaml.YamlNode) -> None:
        seed = dbt_yaml.text(dbt_yaml.get(entry, "name"))
        if not seed:
            return
        config = dbt_yaml.value(dbt_yaml.get(entry, "config"))
        config = config if isinstance(config, dict) else {}
        lines = dbt_yaml.lines(entry)
        name = seed.lower()
        self.b.node(
            NodeKind.DBT_SEED,
            name,
            self.dbt.seeds.get(seed) if self.dbt else None,
            seed_name=seed,
            description=dbt_yaml.text(dbt_yaml.get(entry, "description")),
            documented_in=self.path,
            documented_at=list(lines),
            **{k: v for k, v in config.items() if v is not None},
        )
        self._columns(entry, name, defined_here=False)

    def _columns(self, entry: dbt_yaml.YamlNode, dataset: str, *, defined_here: bool) -> None:
        for column in dbt_yaml.seq(dbt_yaml.get(entry, "columns")):
            column_name = dbt_yaml.text(dbt_yaml.get(column, "name"))
            if not column_name:
                continue
            quoted = dbt_yaml.value(dbt_yaml.get(column, "quote")) is True
            column_name = column_name if quoted else column_name.lower()
            tests = _test_names(column)
            urn = self.b.node(
                NodeKind.COLUMN,
                f"{dataset}.{column_name}",
                self.path if defined_here else None,
                table=dataset,
                column=column_name,
                description=dbt_yaml.text(dbt_yaml.get(column, "description")),
                data_type=dbt_yaml.text(dbt_yaml.get(column, "data_type")),
                tests=tests or None,
                documented_in=self.path,
            )
            if defined_here:
                self.b.edge(Rel.DEFINED_IN, urn, self.b.file_urn, dbt_yaml.lines(column))


def _test_names(column: dbt_yaml.YamlNode) -> list[str]:
    names: list[str] = []
    for key in _TEST_KEYS:
        for test in dbt_yaml.seq(dbt_yaml.get(column, key)):
            found = dbt_yaml.text(test)
            if found is None:
                keys = [name for name, _ in dbt_yaml.items(test)]
                found = keys[0] if keys else None
            if found:
                names.append(found)
    return names


def _looks_like_dbt_yaml(content: str) -> bool:
    return bool(re.search(r"^(sources|models|seeds|snapshots)\s*:", content, re.MULTILINE)) and (
        bool(re.search(r"^version\s*:\s*2\b", content, re.MULTILINE))
    )


# -- dbt seeds --------------------------------------------------------------------------------


def _seed(b: GraphBuilder, path: str, content: str) -> None:
    seed = posixpath.splitext(posixpath.basename(path))[0]
    name = seed.lower()
    urn = b.node(NodeKind.DBT_SEED, name, path, seed_name=seed)
    b.edge(Rel.DEFINED_IN, urn, b.file_urn, (1, _line_count(content)), dialect=None)
    first_line = content.lstrip("\ufeff").split("\n", 1)[0]
    try:
        header = next(csv.reader(io.StringIO(first_line)), [])
    except csv.Error:
        header = []
    for column in header:
        column_name = column.strip().lower()
        if column_name:
            column_urn = b.node(
                NodeKind.COLUMN, f"{name}.{column_name}", path, table=name, column=column_name
            )
            b.edge(Rel.DEFINED_IN, column_urn, b.file_urn, (1, 1), dialect=None)


def _line_count(content: str) -> int:
    if not content:
        return 1
    return max(1, content.count("\n") + (0 if content.endswith("\n") else 1))


__all__ = ["MODEL_PLACEHOLDER", "extract_file_lineage"]
