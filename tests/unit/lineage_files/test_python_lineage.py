"""Python files: SQL run from Python, Spark/pandas table reads and writes, data flow."""

from __future__ import annotations

import pytest

from domain.dbt import DbtProject
from domain.file_lineage import extract_file_lineage
from domain.graph import NodeKind, Rel
from tests.unit.lineage_files.graphs import View

pytestmark = pytest.mark.unit

PATH = "jobs/etl.py"


def python(content: str, path: str = PATH, **kwargs: object) -> View:
    view = View(extract_file_lineage(path, content, "p1", **kwargs))  # type: ignore[arg-type]
    view.check_integrity()
    return view


def fn(name: str) -> str:
    return f"{PATH}#{name}"


def test_spark_table_read_and_save_as_table_write_link_the_datasets_via_the_function() -> None:
    view = python(
        """
def build_daily(spark):
    orders = spark.table("raw.orders")
    daily = orders.groupBy("day").count()
    daily.write.mode("overwrite").saveAsTable("mart.daily_orders")
"""
    )
    function = view.node(fn("build_daily"))
    assert function.kind == NodeKind.PYTHON_FUNCTION
    assert function.properties["function"] == "build_daily"
    assert (fn("build_daily"), PATH) in view.pairs(Rel.DEFINED_IN)
    assert (fn("build_daily"), "raw.orders") in view.pairs(Rel.READS_FROM)
    assert (fn("build_daily"), "mart.daily_orders") in view.pairs(Rel.WRITES_TO)
    edge = view.edge(Rel.READS_FROM, "mart.daily_orders", "raw.orders")
    assert view.name_of(edge.via) == fn("build_daily")
    assert edge.properties["inferred"] == "dataflow"
    assert (edge.line_start, edge.line_end) == (5, 5)  # the write call
    read = view.edge(Rel.READS_FROM, fn("build_daily"), "raw.orders")
    assert (read.line_start, read.line_end) == (3, 3)
    defined = view.edge(Rel.DEFINED_IN, fn("build_daily"), PATH)
    assert (defined.line_start, defined.line_end) == (2, 5)


def test_read_table_insert_into_and_write_to() -> None:
    view = python(
        """
def job(spark):
    df = spark.read.table("db.Events")
    df.write.insertInto("db.events_copy")
    df.writeTo("db.events_v2").append()
"""
    )
    reads = view.pairs(Rel.READS_FROM)
    assert {("db.events_copy", "db.events"), ("db.events_v2", "db.events")} <= reads


def test_spark_sql_string_is_parsed_with_column_lineage() -> None:
    view = python(
        '''
def summarise(spark):
    spark.sql("""
        INSERT INTO mart.summary
        SELECT customer_id, count(*) AS n FROM raw.orders GROUP BY customer_id
    """)
'''
    )
    edge = view.edge(Rel.READS_FROM, "mart.summary", "raw.orders")
    assert edge.confidence == 1.0 and edge.dialect == "spark"
    assert view.name_of(edge.via) == fn("summarise")
    assert (edge.line_start, edge.line_end) == (3, 6)  # the call's lines
    assert ("mart.summary.customer_id", "raw.orders.customer_id") in view.pairs(Rel.DERIVES)
    assert (fn("summarise"), "mart.summary") in view.pairs(Rel.WRITES_TO)


def test_pandas_read_sql_and_to_sql_with_schema() -> None:
    view = python(
        """
import pandas as pd

def clean(con):
    df = pd.read_sql("select * from sales.transactions where amount > 0", con)
    df = df.dropna()
    df.to_sql("tx_clean", con, schema="staging", if_exists="replace")
    pd.read_sql_query("select id from sales.refunds", con)
    pd.read_sql_table("products", con, schema="shop")
"""
    )
    function = fn("clean")
    assert {(function, "sales.transactions"), (function, "sales.refunds")} <= view.pairs(
        Rel.READS_FROM
    )
    assert (function, "shop.products") in view.pairs(Rel.READS_FROM)
    assert (function, "staging.tx_clean") in view.pairs(Rel.WRITES_TO)
    edge = view.edge(Rel.READS_FROM, "staging.tx_clean", "sales.transactions")
    assert edge.properties["inferred"] == "dataflow"
    # data flow is followed: the refunds read does not feed tx_clean
    assert ("staging.tx_clean", "sales.refunds") not in view.pairs(Rel.READS_FROM)


def test_cursor_execute_and_sqlalchemy_text() -> None:
    view = python(
        '''
from sqlalchemy import text

def load(conn, cursor):
    cursor.execute("insert into audit.log (id) select id from raw.events")
    stmt = text("""
        insert into audit.summary (n)
        select count(*) from raw.events
    """)
    conn.execute(stmt)
    conn.execute(text("delete from audit.tmp where id in (select id from raw.purged)"))
'''
    )
    reads = view.pairs(Rel.READS_FROM)
    assert {
        ("audit.log", "raw.events"),
        ("audit.summary", "raw.events"),
        ("audit.tmp", "raw.purged"),
    } <= reads
    assert ("audit.log.id", "raw.events.id") in view.pairs(Rel.DERIVES)
    edge = view.edge(Rel.READS_FROM, "audit.summary", "raw.events")
    assert (edge.line_start, edge.line_end) == (6, 9)  # the text() call
    assert view.lineage.warnings == ()


def test_constants_f_strings_concatenation_and_format_are_resolved() -> None:
    view = python(
        """
SCHEMA = "analytics"
TABLE = SCHEMA + ".daily"

def job(spark, cursor):
    source = f"{SCHEMA}.orders"
    spark.sql(f"insert into {TABLE} select * from {source}")
    cursor.execute("insert into {}.audit select * from {}".format(SCHEMA, source))
    cursor.execute("insert into %s.audit2 select * from raw.x" % SCHEMA)
    query = "select * from "
    query += "raw.appended"
    cursor.execute(query)
"""
    )
    reads = view.pairs(Rel.READS_FROM)
    assert ("analytics.daily", "analytics.orders") in reads
    assert ("analytics.audit", "analytics.orders") in reads
    assert ("analytics.audit2", "raw.x") in reads
    assert (fn("job"), "raw.appended") in reads


def test_dynamic_sql_is_skipped_with_a_warning() -> None:
    view = python(
        """
def job(cursor, table):
    cursor.execute(f"select * from {table}")
    cursor.execute("select 1 from ok_table")
"""
    )
    assert view.pairs(Rel.READS_FROM) == {(fn("job"), "ok_table")}
    assert view.lineage.warnings == (
        f"{PATH}: line 3: SQL passed to execute() is not a constant string; skipped",
    )


def test_module_level_code_is_attributed_to_the_file() -> None:
    view = python('cur.execute("insert into ops.flags select * from ops.raw_flags")\n')
    assert (PATH, "ops.flags") in view.pairs(Rel.WRITES_TO)
    edge = view.edge(Rel.READS_FROM, "ops.flags", "ops.raw_flags")
    assert view.name_of(edge.via) == PATH
    assert not [n for n in view.lineage.nodes if n.kind == NodeKind.PYTHON_FUNCTION]


def test_methods_and_nested_functions_have_qualified_names() -> None:
    view = python(
        """
class Job:
    def run(self):
        def inner():
            return self.spark.table("raw.a")
        self.spark.sql("select * from raw.b")
        return inner
"""
    )
    assert (fn("Job.run.inner"), "raw.a") in view.pairs(Rel.READS_FROM)
    assert (fn("Job.run"), "raw.b") in view.pairs(Rel.READS_FROM)


def test_temp_views_pass_lineage_through_to_later_sql() -> None:
    view = python(
        """
def job(spark):
    spark.table("raw.products").createOrReplaceTempView("products_v")
    spark.sql("insert into marts.products select * from products_v")
"""
    )
    assert not view.has_node("products_v")
    assert ("marts.products", "raw.products") in view.pairs(Rel.READS_FROM)


def test_write_without_followable_input_is_paired_with_the_functions_reads() -> None:
    view = python(
        """
def job(spark, cursor):
    rows = cursor.execute("select * from raw.source_rows").fetchall()
    other = cursor.execute("select * from raw.other").fetchall()
    cursor.executemany("insert into mart.copy (a, b) values (?, ?)", rows)
    spark.createDataFrame(unknown()).write.saveAsTable("mart.loose")
"""
    )
    copied = view.edge(Rel.READS_FROM, "mart.copy", "raw.source_rows")
    assert copied.properties["inferred"] == "dataflow"
    assert ("mart.copy", "raw.other") not in view.pairs(Rel.READS_FROM)
    loose = view.edge(Rel.READS_FROM, "mart.loose", "raw.other")
    assert loose.properties["inferred"] == "same_function" and loose.confidence < 0.9


def test_deletes_are_not_paired_with_reads() -> None:
    view = python(
        """
def job(cursor):
    cursor.execute("select * from raw.a")
    cursor.execute("delete from mart.b")
"""
    )
    assert ("mart.b", "raw.a") not in view.pairs(Rel.READS_FROM)


def test_non_sql_text_calls_are_ignored() -> None:
    view = python('print(text("hello world"))\nwidget.execute(run_job)\n')
    assert view.lineage.edges == ()


def test_syntax_error_is_a_warning() -> None:
    view = python("def broken(:\n")
    assert [n.kind for n in view.lineage.nodes] == [NodeKind.FILE]
    assert "not valid Python" in view.lineage.warnings[0]


def test_dbt_python_model_reads_refs_and_sources() -> None:
    dbt = DbtProject.from_files(
        {"dbt_project.yml": "name: shop\n", "models/py_orders.py": "", "models/stg_a.sql": ""}
    )
    content = """
def model(dbt, session):
    dbt.config(materialized="table", packages=["pandas"])
    orders = dbt.ref("stg_a")
    customers = dbt.source("shop", "customers")
    return orders.join(customers, "customer_id")
"""
    view = python(content, path="models/py_orders.py", dbt=dbt)
    node = view.node("py_orders")
    assert node.kind == NodeKind.DBT_MODEL
    assert node.properties["language"] == "python"
    assert node.properties["packages"] == ["pandas"]
    reads = {t for s, t in view.pairs(Rel.READS_FROM) if s == "py_orders"}
    assert reads == {"stg_a", "shop.customers"}
    assert view.node("shop.customers").kind == NodeKind.DBT_SOURCE
