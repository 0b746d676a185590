"""dbt SQL models: ref/source/config/this, Jinja blocks, hints, aliases, fallbacks."""

from __future__ import annotations

import pytest

from domain.dbt import DbtProject
from domain.file_lineage import extract_file_lineage
from domain.graph import DATASET_KINDS, NodeKind, Rel, node_urn
from tests.unit.lineage_files.graphs import View

pytestmark = pytest.mark.unit

PROJECT_YML = """name: shop
models:
  shop:
    staging:
      +materialized: view
    marts:
      +materialized: table
      +schema: marts
"""

FILES = {
    "dbt_project.yml": PROJECT_YML,
    "models/staging/stg_orders.sql": "",
    "models/staging/stg_payments.sql": "",
    "models/marts/fct_orders.sql": "",
    "models/marts/dim_customers.sql": "{{ config(alias='customers') }}\nselect 1",
    "models/marts/late_orders.sql": "",
    "seeds/country_codes.csv": "",
}
DBT = DbtProject.from_files(FILES)

MODEL = """{{ config(materialized='incremental', unique_key='order_id') }}
-- depends_on: {{ ref('dim_dates') }}
{# {{ ref('commented_out') }} #}
with orders as (
    select * from {{ ref('stg_orders') }}
),
payments as (
    select order_id, sum(amount) as amount
    from {{ source('stripe', 'payments') }}
    group by 1
)
select
    orders.order_id,
    orders.customer_id,
    {{ cents_to_dollars('payments.amount') }} as amount_usd,
    cc.country_name
from orders
left join payments on orders.order_id = payments.order_id
left join {{ ref("country_codes") }} cc on cc.iso_code = orders.country_code
{% if is_incremental() %}
where orders.updated_at > (select max(updated_at) from {{ this }})
  and orders.order_id not in (select order_id from {{ ref('late_orders') }})
{% endif %}
"""


def model(content: str, path: str = "models/marts/fct_orders.sql", **kwargs: object) -> View:
    dbt = kwargs.pop("dbt", DBT)
    view = View(extract_file_lineage(path, content, "p1", dbt=dbt, **kwargs))  # type: ignore[arg-type]
    view.check_integrity()
    return view


def reads(view: View, owner: str) -> set[str]:
    return {t for s, t in view.pairs(Rel.READS_FROM) if s == owner}


def test_refs_and_sources_become_reads_from_edges_of_the_model() -> None:
    view = model(MODEL)
    assert reads(view, "fct_orders") == {
        "dim_dates",
        "stg_orders",
        "stripe.payments",
        "country_codes",
        "late_orders",
    }
    assert view.node("stg_orders").kind == NodeKind.DBT_MODEL
    assert view.node("stripe.payments").kind == NodeKind.DBT_SOURCE
    assert view.node("country_codes").kind == NodeKind.DBT_SEED  # ref() to a seed
    assert not view.has_node("commented_out")  # Jinja comments are removed


def test_model_node_is_defined_in_its_file_with_config_properties() -> None:
    view = model(MODEL)
    node = view.node("fct_orders")
    assert node.kind == NodeKind.DBT_MODEL
    assert node.path == "models/marts/fct_orders.sql"
    assert node.properties["materialized"] == "incremental"  # file config beats folder config
    assert node.properties["unique_key"] == "order_id"
    assert node.properties["schema"] == "marts"  # folder config from dbt_project.yml
    assert node.properties["model_name"] == "fct_orders"
    edge = view.edge(Rel.DEFINED_IN, "fct_orders", "models/marts/fct_orders.sql")
    assert (edge.line_start, edge.line_end) == (1, 23)


def test_edges_carry_the_line_of_the_call_in_the_original_file() -> None:
    view = model(MODEL)
    lines = {
        target: (edge.line_start, edge.line_end)
        for target in ("stg_orders", "stripe.payments", "country_codes", "late_orders")
        for edge in [view.edge(Rel.READS_FROM, "fct_orders", target)]
    }
    assert lines == {
        "stg_orders": (5, 5),
        "stripe.payments": (9, 9),
        "country_codes": (19, 19),
        "late_orders": (22, 22),
    }


def test_edge_found_only_inside_an_if_block_is_conditional() -> None:
    view = model(MODEL)
    assert view.edge(Rel.READS_FROM, "fct_orders", "late_orders").conditional is True
    assert view.edge(Rel.READS_FROM, "fct_orders", "stg_orders").conditional is False


def test_an_unconditional_occurrence_wins_over_a_conditional_one() -> None:
    content = """select * from {{ ref('a') }}
{% if var('full', false) %}
union all select * from {{ ref('a') }}
union all select * from {{ ref('b') }}
{% endif %}
"""
    view = model(content)
    edge_a = view.edge(Rel.READS_FROM, "fct_orders", "a")
    assert edge_a.conditional is False and (edge_a.line_start, edge_a.line_end) == (1, 1)
    assert edge_a.properties["also_at"] == [[3, 3]]
    assert view.edge(Rel.READS_FROM, "fct_orders", "b").conditional is True


def test_refs_in_for_loops_and_else_branches_are_conditional_but_present() -> None:
    content = """{% for region in ['eu', 'us'] %}
select * from {{ ref('orders_' ~ region) }}
union all
{% endfor %}
select * from {{ ref('orders_global') }}
{% if target.name == 'prod' %}
join {{ ref('prod_only') }} using (id)
{% else %}
join {{ ref('dev_only') }} using (id)
{% endif %}
"""
    view = model(content)
    assert view.edge(Rel.READS_FROM, "fct_orders", "prod_only").conditional
    assert view.edge(Rel.READS_FROM, "fct_orders", "dev_only").conditional
    assert not view.edge(Rel.READS_FROM, "fct_orders", "orders_global").conditional
    assert any("non-literal" in warning for warning in view.lineage.warnings)


def test_for_tag_and_set_expressions_are_evaluated_unconditionally() -> None:
    content = """{% set rels = [ref('a'), ref('b')] %}
{% for rel in [ref('c')] %}
select * from {{ rel }}
{% endfor %}
"""
    view = model(content)
    for name in ("a", "b", "c"):
        assert view.edge(Rel.READS_FROM, "fct_orders", name).conditional is False


def test_depends_on_hint_is_an_edge_marked_as_a_hint() -> None:
    view = model(MODEL)
    edge = view.edge(Rel.READS_FROM, "fct_orders", "dim_dates")
    assert edge.properties.get("depends_on_hint") is True
    assert (edge.line_start, edge.line_end) == (2, 2)
    assert "depends_on_hint" not in view.edge(Rel.READS_FROM, "fct_orders", "stg_orders").properties


def test_this_is_not_a_dependency() -> None:
    view = model(MODEL)
    assert ("fct_orders", "fct_orders") not in view.pairs(Rel.READS_FROM)
    assert not any("__dbt" in node.name for node in view.lineage.nodes)


def test_column_lineage_through_ctes_and_macros() -> None:
    view = model(MODEL)
    derives = view.pairs(Rel.DERIVES)
    assert ("fct_orders.order_id", "stg_orders.order_id") in derives
    assert ("fct_orders.country_name", "country_codes.country_name") in derives
    # a macro given a column by name keeps the column's lineage
    assert ("fct_orders.amount_usd", "stripe.payments.amount") in derives


def test_an_alias_is_a_property_and_refs_meet_the_model_whatever_they_know() -> None:
    own = model(
        "{{ config(alias='customers') }}\nselect id from {{ ref('stg_orders') }}",
        path="models/marts/dim_customers.sql",
    )
    node = own.node("dim_customers")
    assert node.kind == NodeKind.DBT_MODEL
    assert node.properties["model_name"] == "dim_customers"
    assert node.properties["alias"] == "customers"
    referencing = model("select * from {{ ref('dim_customers') }}")
    assert reads(referencing, "fct_orders") == {"dim_customers"}
    assert referencing.node("dim_customers").path == "models/marts/dim_customers.sql"
    assert referencing.node("dim_customers").urn == node.urn


def test_ref_and_plain_sql_table_meet_on_one_dataset_node() -> None:
    dbt_side = model("select * from {{ ref('stg_orders') }}")
    sql_side = View(
        extract_file_lineage("adhoc/q.sql", "insert into x select * from stg_orders", "p1")
    )
    urn = node_urn(NodeKind.TABLE, "p1", "stg_orders")
    assert dbt_side.node("stg_orders").urn == urn
    assert sql_side.node("stg_orders").urn == urn


def test_two_argument_ref_uses_the_model_name() -> None:
    view = model("select * from {{ ref('shop', 'stg_payments') }}")
    assert reads(view, "fct_orders") == {"stg_payments"}
    assert view.node("stg_payments").properties["package"] == "shop"


def test_versioned_ref_and_whitespace_control() -> None:
    view = model("select * from {{- ref('stg_orders', v=2) -}} join {{source('s','t')}} using (id)")
    assert reads(view, "fct_orders") == {"stg_orders", "s.t"}


def test_every_ref_is_an_edge_even_when_the_rendered_sql_does_not_parse() -> None:
    content = """select ,,, {{ ref('stg_orders') }}
where (( {{ source('raw', 'things') }} order by by
{{ some_macro() }}
"""
    view = model(content)
    assert reads(view, "fct_orders") == {"stg_orders", "raw.things"}
    assert view.lineage.warnings


def test_macro_alone_on_a_line_is_retried_as_a_clause() -> None:
    content = """select o.id, o.amount
from {{ ref('stg_orders') }} o
{{ limit_in_dev(500) }}
"""
    view = model(content)
    assert ("fct_orders.amount", "stg_orders.amount") in view.pairs(Rel.DERIVES)
    assert view.lineage.warnings == ()


def test_for_loop_with_loop_last_comma_still_parses() -> None:
    content = """select
    o.id,
    {% for m in ['a', 'b'] %}
    sum(o.amount) as {{ m }}_amount{% if not loop.last %},{% endif %}
    {% endfor %}
from {{ ref('stg_orders') }} o
group by 1
"""
    view = model(content)
    assert ("fct_orders.id", "stg_orders.id") in view.pairs(Rel.DERIVES)
    assert not any("could not parse" in warning for warning in view.lineage.warnings)


def test_hard_coded_tables_in_a_model_are_table_nodes() -> None:
    view = model("select * from {{ ref('stg_orders') }} join legacy.lookup using (id)")
    assert reads(view, "fct_orders") == {"stg_orders", "legacy.lookup"}
    assert view.node("legacy.lookup").kind == NodeKind.TABLE


def test_snapshot_is_a_model_named_after_the_block() -> None:
    files = {**FILES, "snapshots/orders_snapshot.sql": ""}
    content = """{% snapshot orders_snapshot %}
{{ config(target_schema='snapshots', unique_key='id', strategy='check', check_cols='all') }}
select * from {{ source('shop', 'orders') }}
{% endsnapshot %}
"""
    view = model(content, path="snapshots/orders_snapshot.sql", dbt=DbtProject.from_files(files))
    node = view.node("orders_snapshot")
    assert node.properties["resource_type"] == "snapshot"
    assert reads(view, "orders_snapshot") == {"shop.orders"}


def test_analysis_files_read_refs_as_the_file() -> None:
    view = model("select * from {{ ref('stg_orders') }}", path="analyses/a.sql")
    assert view.pairs(Rel.READS_FROM) == {("analyses/a.sql", "stg_orders")}


def test_macro_files_give_only_the_file_node() -> None:
    content = "{% macro m(x) %} select * from {{ ref('stg_orders') }} {% endmacro %}"
    view = model(content, path="macros/m.sql")
    assert view.lineage.edges == ()


def test_dbt_sql_without_a_project_is_read_as_a_model_named_after_the_file() -> None:
    view = model("select * from {{ ref('stg_orders') }}", path="x/my_model.sql", dbt=None)
    node = view.node("my_model")
    assert node.kind == NodeKind.DBT_MODEL and node.properties["inferred"] is True
    assert reads(view, "my_model") == {"stg_orders"}


def test_dialect_is_recorded_on_dbt_edges() -> None:
    view = model(MODEL, dialect="snowflake")
    assert {edge.dialect for edge in view.lineage.edges} == {"snowflake"}


def test_unclosed_block_is_a_warning() -> None:
    view = model("select * from {{ ref('stg_orders') }}\n{% if x %}\nwhere 1 = 1\n")
    assert reads(view, "fct_orders") == {"stg_orders"}
    assert any("not closed" in warning for warning in view.lineage.warnings)


def test_datasets_read_by_a_model_are_dataset_kinds() -> None:
    view = model(MODEL)
    by_urn = view.by_urn
    for edge in view.lineage.edges:
        if edge.rel == Rel.READS_FROM:
            assert by_urn[edge.target].kind in DATASET_KINDS


def test_model_that_is_one_macro_call_keeps_the_refs_inside_its_arguments() -> None:
    content = """{{ dbt_utils.union_relations(
    relations=[ref('orders_eu'), ref('orders_us')],
    source_column_name='region'
) }}
"""
    view = model(content)
    assert reads(view, "fct_orders") == {"orders_eu", "orders_us"}
    edge = view.edge(Rel.READS_FROM, "fct_orders", "orders_us")
    assert (edge.line_start, edge.line_end) == (2, 2)
    assert view.lineage.warnings == ()
