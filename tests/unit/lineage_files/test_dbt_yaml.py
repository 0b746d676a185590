"""dbt properties YAML and seeds: sources, models, seeds and columns with descriptions."""

from __future__ import annotations

import pytest

from domain.dbt import DbtProject
from domain.file_lineage import extract_file_lineage
from domain.graph import NodeKind, Rel
from tests.unit.lineage_files.graphs import View

pytestmark = pytest.mark.unit

DBT = DbtProject.from_files(
    {
        "dbt_project.yml": "name: shop\n",
        "models/staging/stg_orders.sql": "",
        "models/marts/fct_orders.sql": "{{ config(alias='orders') }} select 1",
        "seeds/country_codes.csv": "",
    }
)

SOURCES = """version: 2

sources:
  - name: shop
    description: The shop database.
    database: raw
    schema: shop_public
    loaded_at_field: _synced_at
    freshness:
      warn_after: {count: 12, period: hour}
    tables:
      - name: orders
        description: One row per order.
        columns:
          - name: id
            description: Primary key.
            data_tests: [unique, not_null]
          - name: Status
            description: Order status.
      - name: customers
        identifier: customer_table
        loaded_at_field: updated_at
      - name: products
"""

MODELS = """version: 2

models:
  - name: stg_orders
    description: Cleaned orders.
    columns:
      - name: order_id
        description: Primary key.
        tests:
          - unique
          - relationships:
              to: ref('stg_customers')
              field: customer_id
  - name: fct_orders
    description: Order facts.
    config:
      materialized: table
      tags: [finance]

seeds:
  - name: country_codes
    description: ISO country codes.
    columns:
      - name: iso_code
        description: Two letters.
"""


def yaml_view(path: str, content: str, dbt: DbtProject | None = DBT) -> View:
    view = View(extract_file_lineage(path, content, "p1", dbt=dbt))
    view.check_integrity()
    return view


def test_sources_become_dbt_source_nodes_with_properties() -> None:
    view = yaml_view("models/staging/sources.yml", SOURCES)
    orders = view.node("shop.orders")
    assert orders.kind == NodeKind.DBT_SOURCE
    assert orders.path == "models/staging/sources.yml"
    assert orders.properties["description"] == "One row per order."
    assert orders.properties["source_description"] == "The shop database."
    assert orders.properties["loaded_at_field"] == "_synced_at"
    assert orders.properties["freshness"] == {"warn_after": {"count": 12, "period": "hour"}}
    assert orders.properties["database"] == "raw"
    assert orders.properties["relation"] == "shop_public.orders"
    customers = view.node("shop.customers")
    assert customers.properties["loaded_at_field"] == "updated_at"  # table overrides source
    assert customers.properties["relation"] == "shop_public.customer_table"
    assert view.has_node("shop.products")


def test_sources_are_defined_in_the_yaml_with_their_lines() -> None:
    view = yaml_view("models/staging/sources.yml", SOURCES)
    edge = view.edge(Rel.DEFINED_IN, "shop.orders", "models/staging/sources.yml")
    assert (edge.line_start, edge.line_end) == (12, 19)
    edge = view.edge(Rel.DEFINED_IN, "shop.products", "models/staging/sources.yml")
    assert (edge.line_start, edge.line_end) == (23, 23)


def test_source_columns_have_descriptions_and_tests() -> None:
    view = yaml_view("models/staging/sources.yml", SOURCES)
    column = view.node("shop.orders.id")
    assert column.kind == NodeKind.COLUMN
    assert column.properties["description"] == "Primary key."
    assert column.properties["tests"] == ["unique", "not_null"]
    assert view.has_node("shop.orders.status")  # names lower-cased like the SQL extractor's


def test_models_get_descriptions_config_and_columns_under_their_dataset_name() -> None:
    view = yaml_view("models/schema.yml", MODELS)
    stg = view.node("stg_orders")
    assert stg.kind == NodeKind.DBT_MODEL
    assert stg.properties["description"] == "Cleaned orders."
    assert stg.path == "models/staging/stg_orders.sql"  # the model's file, not the YAML
    assert stg.properties["documented_in"] == "models/schema.yml"
    column = view.node("stg_orders.order_id")
    assert column.properties["description"] == "Primary key."
    assert column.properties["tests"] == ["unique", "relationships"]
    facts = view.node("fct_orders")  # the alias is a property, not the node's name
    assert facts.properties["model_name"] == "fct_orders"
    assert facts.properties["materialized"] == "table"
    assert facts.properties["tags"] == ["finance"]


def test_yaml_tests_are_not_lineage() -> None:
    view = yaml_view("models/schema.yml", MODELS)
    assert not view.has_node("stg_customers")
    assert not [edge for edge in view.lineage.edges if edge.rel == Rel.READS_FROM]


def test_seeds_in_yaml_are_dbt_seed_nodes() -> None:
    view = yaml_view("models/schema.yml", MODELS)
    seed = view.node("country_codes")
    assert seed.kind == NodeKind.DBT_SEED
    assert seed.path == "seeds/country_codes.csv"
    assert seed.properties["description"] == "ISO country codes."
    assert view.node("country_codes.iso_code").properties["description"] == "Two letters."


def test_seed_csv_defines_the_seed_and_its_header_columns() -> None:
    view = yaml_view("seeds/country_codes.csv", "iso_code,Country Name\nUS,United States\n")
    assert view.node("country_codes").kind == NodeKind.DBT_SEED
    assert ("country_codes", "seeds/country_codes.csv") in view.pairs(Rel.DEFINED_IN)
    assert view.has_node("country_codes.iso_code")
    assert view.has_node("country_codes.country name")


def test_schema_and_sources_yml_are_read_without_a_project() -> None:
    view = yaml_view("warehouse/sources.yml", SOURCES, dbt=None)
    assert view.node("shop.orders").kind == NodeKind.DBT_SOURCE


def test_unrelated_yaml_outside_a_project_is_only_a_file() -> None:
    view = yaml_view(".github/workflows/ci.yml", "on: push\njobs: {}\n", dbt=None)
    assert [node.kind for node in view.lineage.nodes] == [NodeKind.FILE]


def test_dbt_project_yml_names_the_project_on_the_file_node() -> None:
    view = yaml_view("dbt_project.yml", "name: shop\nmodels:\n  shop:\n    +materialized: view\n")
    assert view.node("dbt_project.yml").properties["dbt_project"] == "shop"
    assert view.lineage.edges == ()


def test_invalid_yaml_is_a_warning() -> None:
    view = yaml_view("models/schema.yml", "models:\n  - name: [unclosed\n")
    assert view.lineage.warnings and "not valid YAML" in view.lineage.warnings[0]
    assert [node.kind for node in view.lineage.nodes] == [NodeKind.FILE]


def test_yaml_anchors_and_merge_keys() -> None:
    content = """version: 2
x-common: &common
  loaded_at_field: _loaded_at
  schema: landing
sources:
  - name: crm
    <<: *common
    tables:
      - name: accounts
"""
    view = yaml_view("models/sources.yml", content)
    node = view.node("crm.accounts")
    assert node.properties["loaded_at_field"] == "_loaded_at"
    assert node.properties["relation"] == "landing.accounts"
