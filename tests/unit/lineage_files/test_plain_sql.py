"""Plain .sql files: statements -> datasets, columns and processes, with their evidence."""

from __future__ import annotations

import pytest

from domain.file_lineage import extract_file_lineage
from domain.graph import NodeKind, Rel, node_urn
from tests.unit.lineage_files.graphs import View

pytestmark = pytest.mark.unit

SCRIPT = """-- nightly load
create view reporting.v_orders as
select o.id, o.amount
from raw.orders o;

insert into mart.daily (day, total)
select o.day, sum(o.amount)
from raw.orders o
join raw.customers c on c.id = o.customer_id
group by o.day;

select * from mart.daily;

create table mart.big_customers as select c.id as customer_id from raw.customers c;
"""


def lineage(content: str, path: str = "etl/load.sql", dialect: str | None = "postgres") -> View:
    view = View(extract_file_lineage(path, content, "p1", dialect=dialect))
    view.check_integrity()
    return view


def test_file_node_is_always_there() -> None:
    view = lineage(SCRIPT)
    file_node = view.node("etl/load.sql")
    assert file_node.kind == NodeKind.FILE
    assert file_node.urn == node_urn(NodeKind.FILE, "p1", "etl/load.sql")
    assert file_node.path == "etl/load.sql"


def test_dataset_to_dataset_edges_point_downstream_to_upstream() -> None:
    view = lineage(SCRIPT)
    assert view.pairs(Rel.READS_FROM) >= {
        ("reporting.v_orders", "raw.orders"),
        ("mart.daily", "raw.orders"),
        ("mart.daily", "raw.customers"),
        ("mart.big_customers", "raw.customers"),
    }
    for target in ("reporting.v_orders", "mart.daily"):
        edge = view.edge(Rel.READS_FROM, target, "raw.orders")
        assert view.name_of(edge.via) == "etl/load.sql"


def test_file_writes_targets_and_reads_only_for_statements_without_target() -> None:
    view = lineage(SCRIPT)
    assert ("etl/load.sql", "mart.daily") in view.pairs(Rel.WRITES_TO)
    assert ("etl/load.sql", "reporting.v_orders") in view.pairs(Rel.WRITES_TO)
    file_reads = {t for s, t in view.pairs(Rel.READS_FROM) if s == "etl/load.sql"}
    assert file_reads == {"mart.daily"}  # only the bare SELECT


def test_created_tables_and_views_are_defined_in_the_file_with_their_kind() -> None:
    view = lineage(SCRIPT)
    assert view.node("reporting.v_orders").kind == NodeKind.VIEW
    assert view.node("mart.big_customers").kind == NodeKind.TABLE
    assert view.node("raw.orders").kind == NodeKind.TABLE
    defined = {s for s, t in view.pairs(Rel.DEFINED_IN) if t == "etl/load.sql"}
    assert defined == {"reporting.v_orders", "mart.big_customers"}  # not the INSERT target
    assert view.node("reporting.v_orders").path == "etl/load.sql"
    assert view.node("raw.orders").path is None


def test_line_ranges_are_the_statements_lines_in_the_original_file() -> None:
    view = lineage(SCRIPT)
    assert _lines(view.edge(Rel.READS_FROM, "reporting.v_orders", "raw.orders")) == (2, 4)
    assert _lines(view.edge(Rel.READS_FROM, "mart.daily", "raw.customers")) == (6, 10)
    assert _lines(view.edge(Rel.READS_FROM, "etl/load.sql", "mart.daily")) == (12, 12)
    assert _lines(view.edge(Rel.DEFINED_IN, "mart.big_customers", "etl/load.sql")) == (14, 14)


def test_evidence_carries_dialect_provenance_and_confidence() -> None:
    view = lineage(SCRIPT)
    for edge in view.lineage.edges:
        assert edge.file_path == "etl/load.sql"
        assert edge.provenance == "parser"
        assert edge.dialect == "postgres"
        assert edge.confidence == 1.0
        assert edge.conditional is False


def test_column_lineage_derives_from_target_to_source() -> None:
    view = lineage(SCRIPT)
    derives = view.pairs(Rel.DERIVES)
    assert ("mart.daily.day", "raw.orders.day") in derives
    assert ("mart.daily.total", "raw.orders.amount") in derives
    assert ("reporting.v_orders.amount", "raw.orders.amount") in derives
    column = view.node("mart.daily.total")
    assert column.kind == NodeKind.COLUMN
    assert column.properties == {"table": "mart.daily", "column": "total"}
    assert _lines(view.edge(Rel.DERIVES, "mart.daily.total", "raw.orders.amount")) == (6, 10)


def test_unparseable_statement_becomes_a_warning_and_the_rest_is_kept() -> None:
    content = "insert into t select a from s;\nselect from where;\ninsert into u select b from s;\n"
    view = lineage(content)
    assert {("t", "s"), ("u", "s")} <= view.pairs(Rel.READS_FROM)
    assert len(view.lineage.warnings) == 1
    assert view.lineage.warnings[0].startswith("etl/load.sql: line 2: could not parse")


def test_keyword_scan_results_are_kept_with_lower_confidence() -> None:
    content = "insert into target_t select * from source_s where x = ((;\n"
    view = lineage(content)
    edge = view.edge(Rel.READS_FROM, "target_t", "source_s")
    assert edge.confidence < 1.0
    assert edge.properties["method"] == "keyword_scan"
    assert view.lineage.warnings


def test_procedures_are_processes_with_their_own_edges() -> None:
    content = """create procedure etl.load_daily()
language sql
as $$
insert into mart.daily select * from raw.orders;
$$;
"""
    view = lineage(content, dialect="snowflake")
    procedure = view.node("etl.load_daily")
    assert procedure.kind == NodeKind.PROCEDURE
    assert ("etl.load_daily", "etl/load.sql") in view.pairs(Rel.DEFINED_IN)
    assert ("etl.load_daily", "mart.daily") in view.pairs(Rel.WRITES_TO)
    assert ("etl.load_daily", "raw.orders") in view.pairs(Rel.READS_FROM)
    edge = view.edge(Rel.READS_FROM, "mart.daily", "raw.orders")
    assert view.name_of(edge.via) == "etl.load_daily"


def test_temporary_tables_are_passed_through_not_nodes() -> None:
    content = """select a, b into #stage from src1;
insert into dbo.target (a, b)
select t.a, t.b from #stage t join src2 s on s.id = t.a;
"""
    view = lineage(content, dialect="tsql")
    assert not view.has_node("#stage")
    assert {("dbo.target", "src1"), ("dbo.target", "src2")} <= view.pairs(Rel.READS_FROM)
    assert ("dbo.target.a", "src1.a") in view.pairs(Rel.DERIVES)
    assert _lines(view.edge(Rel.READS_FROM, "dbo.target", "src1")) == (2, 3)


def test_same_relation_twice_is_one_edge_with_the_other_occurrence_listed() -> None:
    content = "insert into t select a from s;\ninsert into t select b from s;\n"
    view = lineage(content)
    edge = view.edge(Rel.READS_FROM, "t", "s")
    assert _lines(edge) == (1, 1)
    assert edge.properties["also_at"] == [[2, 2]]


def test_unknown_dialect_is_a_warning_not_an_error() -> None:
    view = lineage("insert into t select a from s", dialect="klingon")
    assert ("t", "s") in view.pairs(Rel.READS_FROM)
    assert any("klingon" in warning for warning in view.lineage.warnings)


def test_dialect_defaults_to_ansi_and_aliases_are_canonical() -> None:
    assert lineage("insert into t select a from s", dialect=None).lineage.edges[0].dialect == "ansi"
    view = lineage("insert into t select a from s", dialect="sparksql")
    assert {edge.dialect for edge in view.lineage.edges} == {"spark"}


def test_other_files_give_only_the_file_node() -> None:
    result = extract_file_lineage("README.md", "# select * from t", "p1")
    assert [node.kind for node in result.nodes] == [NodeKind.FILE]
    assert result.edges == () and result.warnings == ()


def test_empty_sql_file() -> None:
    result = extract_file_lineage("empty.sql", "", "p1")
    assert [node.kind for node in result.nodes] == [NodeKind.FILE]
    assert result.edges == ()


def test_results_are_deterministic() -> None:
    first = extract_file_lineage("etl/load.sql", SCRIPT, "p1", dialect="postgres")
    second = extract_file_lineage("etl/load.sql", SCRIPT, "p1", dialect="postgres")
    assert first == second
    assert [edge.to_dict() for edge in first.edges] == [edge.to_dict() for edge in second.edges]


def _lines(edge: object) -> tuple[int, int]:
    return (edge.line_start, edge.line_end)  # type: ignore[attr-defined]
