"""DbtProject: paths, model names, aliases, folder config; finding projects in a repository."""

from __future__ import annotations

import pytest

from domain.dbt import DbtProject, dbt_project_for, find_dbt_projects

pytestmark = pytest.mark.unit

PROJECT_YML = """name: 'shop'
config-version: 2
model-paths: ["transform"]
seed-paths: ["data"]
macro-paths: ["macros", "more_macros"]
models:
  shop:
    +materialized: view
    marts:
      +materialized: table
      finance:
        +schema: finance
        materialized: incremental
"""


def project(**extra: str) -> DbtProject:
    files = {
        "dbt_project.yml": PROJECT_YML,
        "transform/staging/stg_orders.sql": "",
        "transform/marts/finance/fct_revenue.sql": "{{ config(alias='revenue') }}\nselect 1",
        "transform/marts/py_model.py": "",
        "data/country_codes.csv": "",
        "more_macros/m.sql": "",
        "README.md": "",
        **extra,
    }
    return DbtProject.from_files(files)


def test_project_settings_are_read_from_dbt_project_yml() -> None:
    dbt = project()
    assert dbt.name == "shop"
    assert dbt.root == ""
    assert dbt.model_paths == ("transform",)
    assert dbt.seed_paths == ("data",)
    assert dbt.macro_paths == ("macros", "more_macros")


def test_defaults_when_paths_are_not_configured() -> None:
    dbt = DbtProject.from_files({"dbt_project.yml": "name: x\n", "models/a.sql": ""})
    assert dbt.model_paths == ("models",)
    assert dbt.seed_paths == ("seeds",)
    assert dbt.macro_paths == ("macros",)
    assert dict(dbt.models) == {"a": "models/a.sql"}


def test_model_map_finds_a_models_file() -> None:
    dbt = project()
    assert dict(dbt.models) == {
        "stg_orders": "transform/staging/stg_orders.sql",
        "fct_revenue": "transform/marts/finance/fct_revenue.sql",
        "py_model": "transform/marts/py_model.py",
    }
    assert dbt.model_path("fct_revenue") == "transform/marts/finance/fct_revenue.sql"
    assert dbt.model_path("FCT_REVENUE") == "transform/marts/finance/fct_revenue.sql"
    assert dbt.model_path("nope") is None
    assert dict(dbt.seeds) == {"country_codes": "data/country_codes.csv"}


def test_is_model_file_and_model_name_for() -> None:
    dbt = project()
    assert dbt.is_model_file("transform/staging/stg_orders.sql")
    assert dbt.is_model_file("transform/marts/py_model.py")
    assert not dbt.is_model_file("more_macros/m.sql")
    assert not dbt.is_model_file("transform/staging/schema.yml")
    assert not dbt.is_model_file("models/staging/stg_orders.sql")
    assert dbt.model_name_for("transform/staging/stg_orders.sql") == "stg_orders"
    assert dbt.model_name_for("README.md") is None
    assert dbt.is_macro_file("more_macros/m.sql")
    assert dbt.is_seed_file("data/country_codes.csv")


def test_aliases_from_model_config_and_properties_yaml_are_known_but_not_identities() -> None:
    yml = "version: 2\nmodels:\n  - name: stg_orders\n    config:\n      alias: orders\n"
    dbt = project(**{"transform/staging/schema.yml": yml})
    assert dict(dbt.aliases) == {"fct_revenue": "revenue", "stg_orders": "orders"}
    assert dbt.relation_name("fct_revenue") == "fct_revenue"
    assert dbt.relation_name("py_model") == "py_model"
    assert dbt.relation_name("Unknown_Model") == "unknown_model"


def test_folder_config_is_inherited_and_prefix_free() -> None:
    dbt = project()
    assert dbt.config_for("transform/staging/stg_orders.sql") == {"materialized": "view"}
    assert dbt.config_for("transform/marts/finance/fct_revenue.sql") == {
        "materialized": "incremental",
        "schema": "finance",
    }
    assert dbt.config_for("README.md") == {}


def test_project_in_a_subfolder() -> None:
    files = {
        "analytics/dbt/dbt_project.yml": "name: warehouse\n",
        "analytics/dbt/models/marts/fct_orders.sql": "",
        "analytics/dbt/seeds/s.csv": "",
        "models/not_dbt.sql": "",
        "app/main.py": "",
    }
    dbt = DbtProject.from_files(files)
    assert dbt.root == "analytics/dbt"
    assert dict(dbt.models) == {"fct_orders": "analytics/dbt/models/marts/fct_orders.sql"}
    assert dbt.is_model_file("analytics/dbt/models/marts/fct_orders.sql")
    assert not dbt.is_model_file("models/not_dbt.sql")
    assert not dbt.contains("app/main.py")
    assert dbt.seed_name_for("analytics/dbt/seeds/s.csv") == "s"


def test_missing_dbt_project_yml_raises() -> None:
    with pytest.raises(ValueError, match=r"dbt_project\.yml"):
        DbtProject.from_files({"models/a.sql": ""})


def test_invalid_dbt_project_yml_falls_back_to_defaults_with_a_warning() -> None:
    dbt = DbtProject.from_files({"x/dbt_project.yml": "name: [", "x/models/a.sql": ""})
    assert dbt.name == "x"
    assert dbt.model_paths == ("models",)
    assert dbt.warnings


def test_find_dbt_projects_reads_only_what_it_needs() -> None:
    contents = {
        "dbt_project.yml": "name: root_project\n",
        "models/a.sql": "{{ config(alias='alpha') }} select 1",
        "transform/dbt_project.yml": "name: nested\nmodel-paths: [src]\n",
        "transform/src/b.sql": "select * from {{ ref('a') }}",
        "transform/src/schema.yml": "version: 2\nmodels:\n  - name: b\n    config: {alias: beta}\n",
        "dbt_packages/dbt_utils/dbt_project.yml": "name: dbt_utils\n",
        "dbt_packages/dbt_utils/models/x.sql": "",
        "app/big_file.py": "print('not read')",
    }
    asked: list[str] = []

    def read(path: str) -> str:
        asked.append(path)
        return contents[path]

    projects = find_dbt_projects(contents, read)
    assert [p.name for p in projects] == ["root_project", "nested"]
    root, nested = projects
    assert dict(root.models) == {"a": "models/a.sql"}  # nested project's files excluded
    assert dict(root.aliases) == {"a": "alpha"}
    assert nested.root == "transform"
    assert dict(nested.models) == {"b": "transform/src/b.sql"}
    assert dict(nested.aliases) == {"b": "beta"}
    assert "app/big_file.py" not in asked
    assert not any(path.startswith("dbt_packages") for path in asked)
    assert dbt_project_for("transform/src/b.sql", projects) is nested
    assert dbt_project_for("models/a.sql", projects) is root
    assert dbt_project_for("dbt_packages/dbt_utils/models/x.sql", projects) is None


def test_find_dbt_projects_tolerates_unreadable_files() -> None:
    def read(path: str) -> str:
        if path.endswith(".sql"):
            raise OSError("gone")
        return "name: p\n"

    projects = find_dbt_projects(["dbt_project.yml", "models/a.sql"], read)
    assert [dict(p.models) for p in projects] == [{"a": "models/a.sql"}]


def test_no_project_found() -> None:
    assert find_dbt_projects(["models/a.sql"], lambda path: "") == []


def test_project_is_frozen() -> None:
    dbt = project()
    with pytest.raises(AttributeError):
        dbt.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        dbt.models["x"] = "y"  # type: ignore[index]
