"""Unit tests of the pure SQL lineage extractor (domain.lineage)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from domain.lineage import (
    ColumnEdge,
    SqlLineage,
    StatementLineage,
    UnknownDialect,
    extract_sql_lineage,
)

pytestmark = pytest.mark.unit

CORPUS_DIR = Path(__file__).resolve().parents[2] / "corpus" / "sql_lineage"


def _tables(sql: str, dialect: str | None = None) -> tuple[list[str], list[str]]:
    result = extract_sql_lineage(sql, dialect)
    return result.sources, result.targets


def _columns(sql: str, dialect: str | None = None) -> set[tuple[str, str]]:
    result = extract_sql_lineage(sql, dialect)
    return {(edge.source, edge.target) for edge in result.columns}


def _load_score_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sql_lineage_score", CORPUS_DIR / "score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# -- API and dialects ------------------------------------------------------------------


def test_to_json_is_sorted_and_unique() -> None:
    result = extract_sql_lineage(
        "INSERT INTO z_t SELECT b.x AS x, a.y + a.y AS y FROM b_src b JOIN a_src a ON a.id = b.id;"
        "INSERT INTO z_t SELECT b.x AS x, a.y AS y FROM b_src b JOIN a_src a ON a.id = b.id",
        "postgres",
    )
    assert result.to_json() == {
        "sources": ["a_src", "b_src"],
        "targets": ["z_t"],
        "columns": [
            {"source": "a_src.y", "target": "z_t.y"},
            {"source": "b_src.x", "target": "z_t.x"},
        ],
    }
    assert isinstance(result, SqlLineage)
    assert all(isinstance(edge, ColumnEdge) for edge in result.columns)
    assert all(isinstance(statement, StatementLineage) for statement in result.statements)


def test_unknown_dialect_is_an_input_error_listing_valid_dialects() -> None:
    with pytest.raises(UnknownDialect) as raised:
        extract_sql_lineage("SELECT 1", "teradata")
    assert isinstance(raised.value, ValueError)
    for name in ("tsql", "snowflake", "bigquery", "sparksql", "duckdb"):
        assert name in str(raised.value)


@pytest.mark.parametrize(
    "dialect",
    [
        None,
        "ansi",
        "tsql",
        "snowflake",
        "bigquery",
        "postgres",
        "mysql",
        "spark",
        "sparksql",
        "databricks",
        "hive",
        "redshift",
        "oracle",
        "duckdb",
        "TSQL",
    ],
)
def test_every_supported_dialect_extracts_a_simple_insert(dialect: str | None) -> None:
    result = extract_sql_lineage("INSERT INTO tgt (a) SELECT a FROM src", dialect)
    assert result.to_json() == {
        "sources": ["src"],
        "targets": ["tgt"],
        "columns": [{"source": "src.a", "target": "tgt.a"}],
    }


def test_sparksql_is_an_alias_of_spark() -> None:
    assert extract_sql_lineage("SELECT 1", "sparksql").dialect == "spark"


# -- table lineage per statement kind ---------------------------------------------------


def test_select_has_sources_only_and_no_column_edges() -> None:
    result = extract_sql_lineage("SELECT a, b + 1 AS c FROM s JOIN u ON s.id = u.id", "postgres")
    assert (result.sources, result.targets, result.columns) == (["s", "u"], [], [])
    assert result.statements[0].kind == "select"


def test_insert_overwrite_hive() -> None:
    sql = "INSERT OVERWRITE TABLE dw.t PARTITION (dt='2024') SELECT a FROM ods.s WHERE dt='2024'"
    assert _tables(sql, "hive") == (["ods.s"], ["dw.t"])


def test_ctas_and_views() -> None:
    assert _tables("CREATE TABLE t AS SELECT a FROM s") == (["s"], ["t"])
    assert _tables("CREATE VIEW v AS SELECT a FROM s") == (["s"], ["v"])
    result = extract_sql_lineage("CREATE MATERIALIZED VIEW mv AS SELECT a FROM s", "postgres")
    assert (result.sources, result.targets, result.statements[0].kind) == (["s"], ["mv"], "view")


def test_merge_target_and_using_source() -> None:
    sql = """
    MERGE INTO dim d USING (SELECT id, name FROM stg) s ON d.id = s.id
    WHEN MATCHED THEN UPDATE SET name = s.name
    WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, s.name)
    """
    result = extract_sql_lineage(sql, "snowflake")
    assert (result.sources, result.targets) == (["stg"], ["dim"])
    assert {(e.source, e.target) for e in result.columns} == {
        ("stg.name", "dim.name"),
        ("stg.id", "dim.id"),
    }


def test_update_reads_from_joins_and_subqueries() -> None:
    sql = """
    UPDATE t SET t.total = s.amount FROM dbo.target t JOIN dbo.src s ON s.id = t.id
    WHERE t.region IN (SELECT region FROM dbo.regions)
    """
    assert _tables(sql, "tsql") == (["dbo.regions", "dbo.src"], ["dbo.target"])
    assert _columns(sql, "tsql") == {("dbo.src.amount", "dbo.target.total")}


def test_delete_using_and_subquery_sources() -> None:
    assert _tables("DELETE FROM t USING s WHERE t.id = s.id", "postgres") == (["s"], ["t"])
    sql = "DELETE FROM t WHERE id IN (SELECT id FROM gone)"
    assert _tables(sql, "postgres") == (["gone"], ["t"])


def test_tsql_select_into_is_a_target() -> None:
    sql = "SELECT a, b INTO dbo.copy FROM dbo.orig"
    result = extract_sql_lineage(sql, "tsql")
    assert (result.sources, result.targets) == (["dbo.orig"], ["dbo.copy"])
    assert result.statements[0].kind == "select_into"


def test_select_into_variable_is_not_a_table() -> None:
    body = "BEGIN SELECT COUNT(*) INTO v_cnt FROM orders; END;"
    assert _tables(body, "oracle") == (["orders"], [])
    assert _tables("SELECT COUNT(*) INTO @cnt FROM orders", "mysql") == (["orders"], [])


def test_cte_names_are_never_tables() -> None:
    sql = """
    WITH a AS (SELECT id FROM raw.x), b AS (SELECT id FROM a)
    INSERT INTO out_t SELECT id FROM b
    """
    assert _tables(sql, "postgres") == (["raw.x"], ["out_t"])


def test_cte_with_same_name_as_table_reads_the_table() -> None:
    sql = "WITH orders AS (SELECT * FROM orders WHERE open) SELECT * FROM orders"
    assert _tables(sql) == (["orders"], [])


def test_recursive_cte() -> None:
    sql = """
    WITH RECURSIVE tree AS (
      SELECT id, parent_id FROM nodes WHERE parent_id IS NULL
      UNION ALL
      SELECT n.id, n.parent_id FROM nodes n JOIN tree t ON n.parent_id = t.id
    ) SELECT * FROM tree
    """
    assert _tables(sql, "postgres") == (["nodes"], [])


def test_tsql_recursive_cte_without_keyword() -> None:
    sql = """
    WITH r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 10)
    SELECT n FROM r
    """
    assert _tables(sql, "tsql") == ([], [])


def test_copy_and_stages_produce_no_false_tables() -> None:
    assert _tables("COPY INTO raw.t FROM @stage/path/ FILE_FORMAT = (TYPE = CSV)", "snowflake") == (
        [],
        ["raw.t"],
    )
    assert _tables("COPY INTO @out/ FROM (SELECT a FROM mart.t)", "snowflake") == (["mart.t"], [])
    assert _tables("COPY (SELECT * FROM t) TO '/tmp/x.csv'", "postgres") == (["t"], [])
    assert _tables("SELECT * FROM read_csv_auto('x.csv')", "duckdb") == ([], [])
    assert _tables("SELECT SYSDATE FROM dual", "oracle") == ([], [])


def test_ddl_without_data_movement() -> None:
    assert _tables("DROP TABLE IF EXISTS t; TRUNCATE TABLE u; CREATE INDEX i ON w (c)") == ([], [])
    assert _tables("CREATE TABLE t (a INT)") == ([], ["t"])
    assert _tables("ALTER TABLE old_t RENAME TO new_t", "postgres") == (["old_t"], ["new_t"])


# -- scripts and temporary tables ----------------------------------------------------------


def test_intermediate_real_table_is_source_and_target() -> None:
    sql = "CREATE TABLE mid AS SELECT a FROM src; INSERT INTO dst SELECT a FROM mid;"
    result = extract_sql_lineage(sql)
    assert (result.sources, result.targets) == (["mid", "src"], ["dst", "mid"])
    assert {(e.source, e.target) for e in result.columns} == {
        ("src.a", "mid.a"),
        ("mid.a", "dst.a"),
    }


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("tsql", "SELECT a INTO #mid FROM src; INSERT INTO dst (a) SELECT a FROM #mid"),
        (
            "postgres",
            "CREATE TEMP TABLE mid AS SELECT a FROM src; INSERT INTO dst SELECT a FROM mid",
        ),
        (
            "snowflake",
            "CREATE TEMPORARY TABLE mid AS SELECT a FROM src; INSERT INTO dst SELECT a FROM mid",
        ),
        ("spark", "CREATE TEMP VIEW mid AS SELECT a FROM src; INSERT INTO dst SELECT a FROM mid"),
        (
            "tsql",
            "DECLARE @mid TABLE (a INT); INSERT INTO @mid SELECT a FROM src; "
            "INSERT INTO dst SELECT a FROM @mid",
        ),
    ],
)
def test_temporary_tables_are_passed_through(dialect: str, sql: str) -> None:
    result = extract_sql_lineage(sql, dialect)
    assert result.to_json() == {
        "sources": ["src"],
        "targets": ["dst"],
        "columns": [{"source": "src.a", "target": "dst.a"}],
    }


def test_statement_level_lineage_keeps_temporary_tables() -> None:
    result = extract_sql_lineage("SELECT a INTO #t FROM s; INSERT INTO d SELECT a FROM #t", "tsql")
    first, second = result.statements
    assert (first.targets, second.sources) == (["#t"], ["#t"])


def test_statement_line_numbers() -> None:
    sql = "SELECT 1;\n\nINSERT INTO t\nSELECT a\nFROM s;\nDELETE FROM t;"
    spans = [(s.kind, s.line_start, s.line_end) for s in extract_sql_lineage(sql).statements]
    assert spans == [("select", 1, 1), ("insert", 3, 5), ("delete", 6, 6)]


# -- stored procedures and scripting -------------------------------------------------------


TSQL_PROCEDURE = """
CREATE PROCEDURE dbo.usp_load @d DATE AS
BEGIN
  SET NOCOUNT ON
  DECLARE @max INT = (SELECT MAX(id) FROM dbo.watermark)
  BEGIN TRY
    BEGIN TRAN
    SELECT id, amount INTO #batch FROM dbo.raw_sales WHERE sale_date = @d
    IF EXISTS (SELECT 1 FROM dbo.flags WHERE name = 'merge')
      UPDATE f SET f.amount = b.amount FROM dbo.fact_sales f JOIN #batch b ON b.id = f.id
    ELSE
      INSERT INTO dbo.fact_sales (id, amount) SELECT id, amount FROM #batch
    EXEC dbo.usp_log @msg = 'done'
    COMMIT
  END TRY
  BEGIN CATCH
    ROLLBACK;
    THROW;
  END CATCH
END
GO
SELECT * FROM dbo.after_batch
"""


def test_tsql_procedure_without_semicolons() -> None:
    result = extract_sql_lineage(TSQL_PROCEDURE, "tsql")
    assert result.sources == ["dbo.after_batch", "dbo.flags", "dbo.raw_sales", "dbo.watermark"]
    assert result.targets == ["dbo.fact_sales"]
    assert {(e.source, e.target) for e in result.columns} == {
        ("dbo.raw_sales.id", "dbo.fact_sales.id"),
        ("dbo.raw_sales.amount", "dbo.fact_sales.amount"),
    }
    procedure = result.statements[0]
    assert (procedure.kind, procedure.name) == ("procedure", "dbo.usp_load")
    assert (procedure.line_start, procedure.line_end) == (2, 20)
    assert procedure.targets == ["dbo.fact_sales"]
    kinds = [child.kind for child in procedure.children]
    assert kinds == ["declare", "select_into", "select", "update", "insert"]
    assert result.warnings == []


def test_snowflake_scripting_procedure() -> None:
    sql = """
    CREATE OR REPLACE PROCEDURE p() RETURNS STRING LANGUAGE SQL AS
    $$
    DECLARE
      n INT DEFAULT 0;
    BEGIN
      LET c := (SELECT COUNT(*) FROM raw.events);
      IF (c > 0) THEN
        INSERT INTO stg.events (id) SELECT id FROM raw.events;
      END IF;
      RETURN 'ok';
    EXCEPTION
      WHEN OTHER THEN RETURN 'failed';
    END;
    $$;
    """
    result = extract_sql_lineage(sql, "snowflake")
    assert (result.sources, result.targets) == (["raw.events"], ["stg.events"])
    assert _columns(sql, "snowflake") == {("raw.events.id", "stg.events.id")}
    insert = result.statements[0].children[1]
    assert (insert.kind, insert.line_start) == ("insert", 9)


def test_bigquery_procedure_and_script() -> None:
    sql = """
    DECLARE d DATE DEFAULT (SELECT MAX(dt) FROM ds.src);
    CREATE OR REPLACE PROCEDURE ds.p(x INT64)
    BEGIN
      MERGE ds.t T USING ds.s S ON T.id = S.id WHEN MATCHED THEN UPDATE SET v = S.v;
      IF x > 0 THEN
        DELETE ds.t WHERE TRUE;
      END IF;
    END;
    """
    assert _tables(sql, "bigquery") == (["ds.s", "ds.src"], ["ds.t"])


def test_postgres_plpgsql_function() -> None:
    sql = """
    CREATE OR REPLACE FUNCTION etl.load(p_day date) RETURNS void AS $body$
    DECLARE r RECORD;
    BEGIN
      FOR r IN SELECT * FROM src LOOP
        INSERT INTO tgt VALUES (r.a);
      END LOOP;
      INSERT INTO daily (day, total) SELECT p_day, sum(amount) FROM orders;
      PERFORM 1 FROM audit;
    END;
    $body$ LANGUAGE plpgsql;
    """
    result = extract_sql_lineage(sql, "postgres")
    assert (result.sources, result.targets) == (["audit", "orders", "src"], ["daily", "tgt"])
    # p_day is a parameter, not a column of orders
    assert _columns(sql, "postgres") == {("orders.amount", "daily.total")}
    assert result.statements[0].kind == "function"


def test_oracle_package_and_mysql_delimiter_procedures() -> None:
    oracle = """
    CREATE OR REPLACE PACKAGE BODY pkg AS
      PROCEDURE a IS BEGIN INSERT INTO t1 SELECT x FROM s1; END a;
      PROCEDURE b IS BEGIN DELETE FROM t2 WHERE y IN (SELECT y FROM s2); END b;
    END pkg;
    /
    """
    assert _tables(oracle, "oracle") == (["s1", "s2"], ["t1", "t2"])
    mysql = """
    DELIMITER //
    CREATE PROCEDURE p()
    BEGIN
      DECLARE done INT DEFAULT 0;
      IF done = 0 THEN INSERT INTO t SELECT * FROM s; END IF;
    END //
    DELIMITER ;
    """
    assert _tables(mysql, "mysql") == (["s"], ["t"])


def test_dynamic_sql_literals_are_followed() -> None:
    assert _tables("EXEC sp_executesql N'INSERT INTO a SELECT x FROM b'", "tsql") == (["b"], ["a"])
    assert _tables("BEGIN EXECUTE IMMEDIATE 'DELETE FROM stale'; END;", "oracle") == ([], ["stale"])
    assert _tables("DO $$ BEGIN INSERT INTO x SELECT * FROM y; END $$;", "postgres") == (
        ["y"],
        ["x"],
    )


def test_tsql_insert_exec() -> None:
    result = extract_sql_lineage("INSERT INTO dbo.results EXEC dbo.usp_get", "tsql")
    assert (result.sources, result.targets, result.warnings) == ([], ["dbo.results"], [])


def test_tsql_trigger_pseudo_tables_map_to_the_trigger_table() -> None:
    sql = """
    CREATE TRIGGER trg ON dbo.orders AFTER INSERT AS
    INSERT INTO dbo.audit (id) SELECT id FROM inserted
    """
    result = extract_sql_lineage(sql, "tsql")
    assert (result.sources, result.targets) == (["dbo.orders"], ["dbo.audit"])
    assert _columns(sql, "tsql") == {("dbo.orders.id", "dbo.audit.id")}


# -- column lineage --------------------------------------------------------------------------


def test_expression_gives_one_edge_per_input_column() -> None:
    assert _columns("INSERT INTO t SELECT a + b AS c FROM s") == {("s.a", "t.c"), ("s.b", "t.c")}


def test_columns_through_ctes_aliases_and_subqueries() -> None:
    sql = """
    WITH o AS (SELECT customer_id AS cid, amount FROM sales.orders)
    INSERT INTO mart.rev (customer, revenue, top_item)
    SELECT x.cid, x.total, (SELECT MAX(sku) FROM sales.items i WHERE i.cid = x.cid)
    FROM (SELECT cid, SUM(amount) AS total FROM o GROUP BY cid) x
    """
    assert _columns(sql, "postgres") == {
        ("sales.orders.customer_id", "mart.rev.customer"),
        ("sales.orders.amount", "mart.rev.revenue"),
        ("sales.items.sku", "mart.rev.top_item"),
    }


def test_case_and_window_columns_are_sources() -> None:
    sql = """
    CREATE VIEW v AS SELECT CASE WHEN paid THEN amount ELSE 0 END AS due,
           ROW_NUMBER() OVER (PARTITION BY cust ORDER BY ts) AS rn FROM inv
    """
    assert _columns(sql) == {
        ("inv.paid", "v.due"),
        ("inv.amount", "v.due"),
        ("inv.cust", "v.rn"),
        ("inv.ts", "v.rn"),
    }


def test_star_is_expanded_from_ddl_in_the_same_text() -> None:
    sql = "CREATE TABLE s (a INT, b INT); INSERT INTO t SELECT * FROM s;"
    assert _columns(sql) == {("s.a", "t.a"), ("s.b", "t.b")}


def test_unknown_star_is_reported_as_table_star() -> None:
    assert _columns("INSERT INTO t SELECT * FROM s") == {("s.*", "t.*")}


def test_positional_mapping_to_a_known_target_schema() -> None:
    sql = "CREATE TABLE t (k INT, label TEXT); INSERT INTO t SELECT id, name FROM s;"
    assert _columns(sql) == {("s.id", "t.k"), ("s.name", "t.label")}


def test_explicit_insert_column_list_wins_over_names() -> None:
    assert _columns("INSERT INTO t (x, y) SELECT a, b FROM s") == {("s.a", "t.x"), ("s.b", "t.y")}


def test_union_branches_all_feed_the_target() -> None:
    sql = "INSERT INTO t (v) SELECT a FROM s1 UNION ALL SELECT b FROM s2"
    assert _columns(sql) == {("s1.a", "t.v"), ("s2.b", "t.v")}


def test_lateral_flatten_and_unnest_resolve_to_the_array_column() -> None:
    snowflake = "INSERT INTO t (v) SELECT f.value FROM s, LATERAL FLATTEN(input => s.arr) f"
    assert _columns(snowflake, "snowflake") == {("s.arr", "t.v")}
    bigquery = "INSERT INTO ds.t (v) SELECT x FROM ds.s, UNNEST(s.arr) AS x"
    assert _columns(bigquery, "bigquery") == {("ds.s.arr", "ds.t.v")}


def test_ambiguous_unqualified_columns_are_not_guessed() -> None:
    result = extract_sql_lineage("INSERT INTO t SELECT x FROM a JOIN b ON a.id = b.id")
    assert result.columns == []
    assert result.warnings == []
    assert "ambiguous" in result.statements[0].warnings[0]


def test_column_lineage_failure_falls_back_to_table_lineage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from domain.lineage import statement_columns

    def explode(self: Any, expression: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(statement_columns.StatementColumnLineage, "run", explode)
    result = extract_sql_lineage("INSERT INTO t SELECT a FROM s")
    assert (result.sources, result.targets, result.columns) == (["s"], ["t"], [])
    assert "column lineage unavailable" in result.warnings[0]


def test_splitter_failure_falls_back_to_semicolon_split(monkeypatch: pytest.MonkeyPatch) -> None:
    from domain.lineage import sql as sql_module

    def broken(text: str, dialect: Any) -> Any:
        raise IndexError("walker bug")

    monkeypatch.setattr(sql_module, "split_script", broken)
    result = extract_sql_lineage("INSERT INTO t SELECT a FROM s; SELECT * FROM u;", "postgres")
    assert (result.sources, result.targets) == (["s", "u"], ["t"])


# -- names -------------------------------------------------------------------------------------


def test_names_are_lowercased_unless_quoted() -> None:
    assert _tables('SELECT * FROM Sales.Orders JOIN "Crm"."Customers" ON 1=1', "postgres") == (
        ["Crm.Customers", "sales.orders"],
        [],
    )
    assert _tables("SELECT * FROM [Sales].[dbo].[Order Details]", "tsql") == (
        ["Sales.dbo.Order Details"],
        [],
    )
    assert _tables("SELECT * FROM `my-proj.ds.T`", "bigquery") == (["my-proj.ds.T"], [])


def test_qualification_is_kept_as_written() -> None:
    sql = "INSERT INTO wh.mart.t (a) SELECT a FROM s"
    assert _tables(sql, "snowflake") == (["s"], ["wh.mart.t"])
    assert _columns(sql, "snowflake") == {("s.a", "wh.mart.t.a")}


def test_case_insensitive_matching_follows_the_dialect() -> None:
    sql = "WITH Cte AS (SELECT A FROM Src) INSERT INTO Dst SELECT a FROM CTE"
    assert extract_sql_lineage(sql, "tsql").to_json() == {
        "sources": ["src"],
        "targets": ["dst"],
        "columns": [{"source": "src.a", "target": "dst.a"}],
    }


# -- robustness --------------------------------------------------------------------------------


def test_unparseable_statements_become_warnings_and_others_survive() -> None:
    sql = "SELECT * FROM (;\nINSERT INTO good SELECT a FROM fine;\nTHIS IS NOT SQL;"
    result = extract_sql_lineage(sql, "postgres")
    assert (result.sources, result.targets) == (["fine"], ["good"])
    assert len(result.warnings) == 2
    assert result.warnings[0].startswith("line 1:")
    assert [s.kind for s in result.statements] == ["unparsed", "insert", "unparsed"]


def test_keyword_scan_recovers_tables_of_unparseable_dml() -> None:
    sql = "DELETE FROM dbo.queue OUTPUT deleted.id INTO dbo.archive (id) WHERE done = 1"
    result = extract_sql_lineage(sql, "tsql")
    assert result.targets == ["dbo.archive", "dbo.queue"]
    assert "keyword scan" in result.warnings[0]


@pytest.mark.parametrize(
    "text",
    ["", "   \n", ";;;", "'unterminated", "$$", "BEGIN", "END", ")))(((", "\x00\xff", "{{ x }}"],
)
def test_never_raises_on_garbage(text: str) -> None:
    for dialect in ("tsql", "snowflake", "postgres", "oracle", None):
        assert isinstance(extract_sql_lineage(text, dialect), SqlLineage)


def test_dbt_jinja_is_neutralised() -> None:
    sql = """
    {{ config(materialized='incremental') }}
    {# comment #}
    SELECT o.id, p.amount FROM {{ ref('stg_orders') }} o
    JOIN {{ source('stripe', 'payments') }} p ON p.order_id = o.id
    {% if is_incremental() %} WHERE o.ts > (SELECT MAX(ts) FROM {{ this }}) {% endif %}
    """
    result = extract_sql_lineage(sql, "snowflake")
    assert (result.sources, result.targets, result.warnings) == (
        ["stg_orders", "stripe.payments"],
        [],
        [],
    )
    assert result.statements[0].line_start == 4


# -- corpus -------------------------------------------------------------------------------------


def test_corpus_accuracy() -> None:
    score = _load_score_module()
    report: dict[str, Any] = score.score_corpus(score.corpus_paths())
    print("\n" + score.format_table(report))
    overall = report["overall"]
    assert overall["cases"] >= 300
    assert {name for name in report["dialects"]} >= {
        "ansi",
        "tsql",
        "snowflake",
        "bigquery",
        "postgres",
        "mysql",
        "spark",
        "databricks",
        "hive",
        "redshift",
        "oracle",
        "duckdb",
    }
    assert overall["table_exact_rate"] >= 0.95, report["failures"]
    assert overall["column_exact_rate"] >= 0.85, report["failures"]
