"""`upstream lineage extract` works without a server and never crashes on a bad line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from api.cli import cli

pytestmark = pytest.mark.unit


def test_one_sql_text_from_stdin_prints_sources_targets_columns():
    sql = "INSERT INTO Marts.Summary (id, total) SELECT o.id, o.amount FROM staging.orders o"
    result = CliRunner().invoke(cli, ["lineage", "extract", "--dialect", "postgres"], input=sql)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "sources": ["staging.orders"],
        "targets": ["marts.summary"],
        "columns": [
            {"source": "staging.orders.amount", "target": "marts.summary.total"},
            {"source": "staging.orders.id", "target": "marts.summary.id"},
        ],
    }


def test_jsonl_gives_one_line_per_statement_and_errors_in_place():
    lines = "\n".join(
        [
            json.dumps({"sql": "select a from t", "dialect": "duckdb"}),
            json.dumps({"sql": "select 1", "dialect": "klingon"}),
            "{not json",
            json.dumps({"query": "missing sql"}),
            json.dumps({"sql": "create view v as select x from s"}),
        ]
    )
    result = CliRunner().invoke(cli, ["lineage", "extract", "--jsonl", "-"], input=lines)
    assert result.exit_code == 0
    out = [json.loads(line) for line in result.output.splitlines()]
    assert len(out) == 5
    assert out[0]["sources"] == ["t"]
    assert "klingon" in out[1]["error"] and "valid dialects" in out[1]["error"]
    assert "not JSON" in out[2]["error"]
    assert '"sql"' in out[3]["error"]
    assert out[4] == {
        "columns": [{"source": "s.x", "target": "v.x"}],
        "sources": ["s"],
        "targets": ["v"],
    }


def test_an_unknown_dialect_for_a_single_text_exits_2_with_the_valid_ones():
    result = CliRunner().invoke(cli, ["lineage", "extract", "--dialect", "nope"], input="select 1")
    assert result.exit_code == 2
    assert "valid dialects" in result.output
