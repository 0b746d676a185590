"""Semantic chunkers: structure-aware chunks that always fit the embedding budget."""

from __future__ import annotations

import ast
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.chunkers import CHUNK_TYPES, SemanticChunk, chunk_file, estimate_tokens
from domain.chunking import Chunk

Counter = Callable[[str], int]


# -- helpers ------------------------------------------------------------------------------


def assert_complete(
    path: str,
    content: str,
    chunks: list[SemanticChunk],
    max_tokens: int = 256,
    count: Counter = estimate_tokens,
) -> None:
    """Every chunk fits once embedded; every non-blank line is in a chunk, whole or in pieces."""
    lines = content.replace("\r\n", "\n").split("\n")
    covered: set[int] = set()
    pieces: dict[int, list[str]] = {}
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert count(f"{path}\n{chunk.text}") <= max_tokens, chunk
        assert chunk.chunk_type in CHUNK_TYPES
        assert 1 <= chunk.line_start <= chunk.line_end <= len(lines)
        body = "\n".join(lines[chunk.line_start - 1 : chunk.line_end])
        if chunk.text.endswith(body):
            covered.update(range(chunk.line_start - 1, chunk.line_end))
        else:  # a piece of a line too long for the budget
            assert chunk.line_start == chunk.line_end, chunk
            pieces.setdefault(chunk.line_start - 1, []).append(chunk.text)
    for line, texts in pieces.items():
        assert "".join("".join(texts).split()) == "".join(lines[line].split())
        covered.add(line)
    missing = [i + 1 for i, line in enumerate(lines) if line.strip() and i not in covered]
    assert not missing, f"lines not in any chunk: {missing}"
    starts = [c.line_start for c in chunks]
    assert starts == sorted(starts)


def chunks_of(
    path: str,
    content: str,
    *,
    max_tokens: int = 256,
    count_tokens: Counter | None = None,
    dialect: str | None = None,
) -> list[SemanticChunk]:
    """`chunk_file`, checked for completeness and budget."""
    chunks = chunk_file(
        path, content, max_tokens=max_tokens, count_tokens=count_tokens, dialect=dialect
    )
    assert_complete(path, content, chunks, max_tokens, count_tokens or estimate_tokens)
    return chunks


def body_of(chunk: SemanticChunk, content: str) -> str:
    return "\n".join(content.split("\n")[chunk.line_start - 1 : chunk.line_end])


def context_of(chunk: SemanticChunk, content: str) -> str:
    """What the chunk's text has in front of its own lines."""
    return chunk.text[: len(chunk.text) - len(body_of(chunk, content))]


def words(text: str) -> int:
    """A simple stand-in tokenizer: 2 special tokens + one per whitespace-separated word."""
    return 2 + len(text.split())


# -- the chunk --------------------------------------------------------------------------------


@pytest.mark.unit
class TestSemanticChunk:
    def test_is_a_chunk_and_keeps_the_chunk_keys(self) -> None:
        chunk = SemanticChunk(0, "select 1", 1, 1, "sql_statement", name="t", tables=("t",))
        assert isinstance(chunk, Chunk)
        data = chunk.to_dict()
        base = Chunk(0, "select 1", 1, 1, "sql_statement").to_dict()
        assert {k: data[k] for k in base} == base
        assert data["name"] == "t" and data["tables"] == ["t"] and data["columns"] == []
        assert data["parent"] is None

    def test_is_frozen(self) -> None:
        chunk = SemanticChunk(0, "x", 1, 1, "text")
        with pytest.raises(AttributeError):
            chunk.name = "y"  # type: ignore[misc]  # frozen on purpose

    def test_empty_and_blank_files_have_no_chunks(self) -> None:
        assert chunk_file("a.sql", "") == []
        assert chunk_file("a.py", "\n\n  \n") == []

    def test_same_input_same_chunks(self) -> None:
        content = SQL_SCRIPT * 5
        first = chunk_file("a.sql", content, max_tokens=60)
        assert first == chunk_file("a.sql", content, max_tokens=60)


# -- the budget -------------------------------------------------------------------------------


@pytest.mark.unit
class TestBudget:
    def test_estimate_counts_special_tokens_and_is_cautious(self) -> None:
        assert estimate_tokens("") == 2
        assert estimate_tokens("select a.b, c") >= 2 + 5
        assert estimate_tokens("a\nb") == estimate_tokens("a") + estimate_tokens("b") - 2

    def test_the_path_is_part_of_the_budget(self) -> None:
        content = "\n".join(f"line number {i} of some text" for i in range(40))
        short = chunks_of("a.txt", content, max_tokens=80)
        long_path = "very/long/directory/name/" * 4 + "a.txt"
        long = chunks_of(long_path, content, max_tokens=80)
        assert len(long) > len(short)

    def test_uses_the_given_counter(self) -> None:
        content = "\n".join(f"w{i} " * 7 for i in range(30))
        chunks = chunks_of("notes.txt", content, max_tokens=40, count_tokens=words)
        assert all(words(f"notes.txt\n{c.text}") <= 40 for c in chunks)
        assert max(words(f"notes.txt\n{c.text}") for c in chunks) > 30  # chunks are filled

    def test_a_counter_that_does_not_add_up_over_lines_is_still_respected(self) -> None:
        def joins_cost(text: str) -> int:  # every line break costs 4 extra tokens
            return 2 + len(text.split()) + 4 * text.count("\n")

        content = "\n".join(f"a{i} b{i} c{i}" for i in range(60))
        chunks_of("x.txt", content, max_tokens=40, count_tokens=joins_cost)

    def test_a_line_longer_than_the_budget_is_split_into_pieces_of_that_line(self) -> None:
        long_line = "SELECT " + ", ".join(f"col_{i}" for i in range(200)) + " FROM t;"
        content = f"SELECT 1;\n{long_line}\nSELECT 2;"
        chunks = chunks_of("a.sql", content, max_tokens=60)
        pieces = [c for c in chunks if c.line_start == c.line_end == 2]
        assert len(pieces) > 3
        assert "".join(c.text for c in pieces) == long_line

    def test_a_word_longer_than_the_budget_is_cut(self) -> None:
        content = "x" * 3000
        chunks = chunks_of("blob.txt", content, max_tokens=50)
        assert "".join(c.text for c in chunks) == content

    def test_no_room_after_the_path_is_an_error(self) -> None:
        with pytest.raises(ValueError, match="no room"):
            chunk_file("a/" * 50 + "x.sql", "select 1", max_tokens=20)


# -- SQL -----------------------------------------------------------------------------------------

SQL_SCRIPT = """-- Orders that were paid.
-- One row per order.
CREATE OR REPLACE VIEW analytics.paid_orders AS
SELECT o.order_id, o.amount, c.name AS customer_name
FROM raw.orders o
JOIN raw.customers c ON c.id = o.customer_id
WHERE o.status = 'paid; not a terminator' -- a comment; with a semicolon
;

INSERT INTO audit.log (msg) VALUES ('one');
INSERT INTO audit.log (msg) VALUES ('two');

/* The dimension.
   Not a statement; not a boundary. */
CREATE TABLE dim.customer (id INT, name TEXT);

CREATE FUNCTION add_one(x int) RETURNS int AS $$
  SELECT x + 1;
$$ LANGUAGE sql;
"""


def big_select(columns: int = 60, with_string: bool = False) -> str:
    select = ",\n".join(f"    o.column_{i} AS alias_{i}" for i in range(columns))
    literal = (
        "\n  AND o.note = 'a multi-line\nstring literal\nthat holds FROM and WHERE'" * with_string
    )
    return (
        f"INSERT INTO mart.wide\nSELECT\n{select}\nFROM raw.orders o\n"
        "LEFT JOIN raw.customers c ON c.id = o.customer_id\n"
        f"WHERE o.status = 'paid'{literal}\n  AND o.amount > 0\n"
        "GROUP BY 1, 2\nORDER BY 1;\n"
    )


@pytest.mark.unit
class TestSql:
    def test_one_chunk_per_statement_with_type_name_tables_and_columns(self) -> None:
        chunks = chunks_of("warehouse/script.sql", SQL_SCRIPT)
        kinds = [(c.chunk_type, c.name) for c in chunks]
        assert kinds == [
            ("sql_view", "analytics.paid_orders"),
            ("sql_statement", "audit.log"),
            ("sql_table", "dim.customer"),
            ("sql_function", "add_one"),
        ]
        view = chunks[0]
        assert set(view.tables) == {"analytics.paid_orders", "raw.orders", "raw.customers"}
        assert {"order_id", "amount", "customer_name", "status", "customer_id"} <= set(view.columns)
        assert "o" not in view.columns and "c" not in view.columns

    def test_leading_comments_stay_with_their_statement(self) -> None:
        chunks = chunks_of("script.sql", SQL_SCRIPT)
        assert chunks[0].line_start == 1 and chunks[0].text.startswith("-- Orders that were paid.")
        assert chunks[2].text.startswith("/* The dimension.")

    def test_semicolons_in_strings_and_comments_do_not_end_statements(self) -> None:
        chunks = chunks_of("script.sql", SQL_SCRIPT)
        assert chunks[0].line_end == 8 and chunks[0].text.rstrip().endswith(";")

    def test_small_statements_are_merged_but_definitions_are_not(self) -> None:
        chunks = chunks_of("script.sql", SQL_SCRIPT)
        assert chunks[1].text.count("INSERT INTO") == 2
        content = "CREATE VIEW a AS SELECT 1;\nCREATE VIEW b AS SELECT 2;\n"
        assert [c.name for c in chunks_of("v.sql", content)] == ["a", "b"]

    def test_statements_on_one_line_share_a_chunk(self) -> None:
        chunks = chunks_of("a.sql", "SELECT 1; SELECT 2;\nCREATE VIEW v AS SELECT 3;")
        assert [(c.line_start, c.line_end) for c in chunks] == [(1, 1), (2, 2)]

    def test_a_big_statement_is_split_at_clauses(self) -> None:
        content = big_select()
        chunks = chunks_of("mart.sql", content, max_tokens=200)
        assert len(chunks) > 2
        lines = content.split("\n")
        clauses = {"SELECT", "FROM", "LEFT", "WHERE", "GROUP", "ORDER", "AND"}
        for chunk in chunks[1:]:
            first = lines[chunk.line_start - 1].split()[0]
            assert first in clauses or first.startswith("o.column_"), first
        assert any(lines[c.line_start - 1].startswith("FROM raw.orders") for c in chunks)

    def test_parts_of_a_statement_carry_its_head_as_context(self) -> None:
        content = big_select()
        chunks = chunks_of("mart.sql", content, max_tokens=200)
        assert context_of(chunks[0], content) == ""
        assert all(context_of(c, content) == "-- INSERT INTO mart.wide ...\n" for c in chunks[1:])
        assert all(c.name == "mart.wide" and c.chunk_type == "sql_statement" for c in chunks)

    def test_never_splits_inside_a_string_literal_or_a_block_comment(self) -> None:
        content = big_select(30, with_string=True) + "/* one\ntwo\nthree */ SELECT 1;\n"
        lines = content.split("\n")
        openers = [
            i + 1 for i, line in enumerate(lines) if line.endswith(("'a multi-line", "/* one"))
        ]
        inside = {opener + n for opener in openers for n in (1, 2)}  # the two lines after each
        assert len(inside) == 4
        for max_tokens in (40, 60, 90, 150):
            chunks = chunks_of("mart.sql", content, max_tokens=max_tokens)
            assert not {c.line_start for c in chunks} & inside, max_tokens

    def test_a_huge_cte_is_split_out_as_sql_cte(self) -> None:
        ctes = ",\n".join(
            f"step_{n} AS (\n    SELECT id, amount_{n}\n    FROM raw.source_{n}\n"
            f"    WHERE amount_{n} > {n}\n)"
            for n in range(6)
        )
        content = f"CREATE VIEW mart.steps AS\nWITH {ctes}\nSELECT * FROM step_5;\n"
        chunks = chunks_of("steps.sql", content, max_tokens=90)
        ctes_found = [c for c in chunks if c.chunk_type == "sql_cte"]
        assert ctes_found and all(c.parent == "mart.steps" for c in ctes_found)
        assert {c.name for c in ctes_found} <= {f"step_{n}" for n in range(6)}
        assert chunks[0].chunk_type == "sql_view" and chunks[0].name == "mart.steps"
        assert all("step_" not in t for c in chunks for t in c.tables)  # CTEs are not tables
        whole = chunks_of("steps.sql", content)
        assert len(whole) == 1 and whole[0].chunk_type == "sql_view"

    def test_tsql_go_batches_and_procedure_bodies(self) -> None:
        content = (
            "SET ANSI_NULLS ON\nGO\n"
            "CREATE PROCEDURE dbo.usp_load @d DATE AS\nBEGIN\n"
            "  SET NOCOUNT ON\n  DELETE FROM dbo.tgt WHERE d = @d\n"
            "  INSERT INTO dbo.tgt (a) SELECT a FROM dbo.src WHERE d = @d\nEND\nGO\n"
            "CREATE PROCEDURE dbo.usp_other AS\n  SELECT 1;\n  SELECT 2;\nGO\n"
        )
        chunks = chunks_of("procs.sql", content, dialect="tsql")
        assert [(c.chunk_type, c.name) for c in chunks] == [
            ("sql_statement", None),
            ("sql_procedure", "dbo.usp_load"),
            ("sql_procedure", "dbo.usp_other"),
        ]
        assert chunks[1].text.endswith("END\nGO") and chunks[2].text.count("SELECT") == 2
        assert {"dbo.tgt", "dbo.src"} <= set(chunks[1].tables)

    def test_tsql_statements_without_semicolons_are_told_apart(self) -> None:
        content = "CREATE TABLE dbo.a (id INT)\nCREATE VIEW dbo.v AS SELECT id FROM dbo.a\n"
        chunks = chunks_of("t.sql", content, dialect="tsql")
        assert [(c.chunk_type, c.name) for c in chunks] == [
            ("sql_table", "dbo.a"),
            ("sql_view", "dbo.v"),
        ]

    def test_begin_end_bodies_are_kept_whole(self) -> None:
        content = (
            "CREATE PROCEDURE ds.p(x INT64)\nBEGIN\n"
            "  INSERT INTO ds.t SELECT * FROM ds.s;\n  IF x > 0 THEN\n"
            "    DELETE ds.t WHERE TRUE;\n  END IF;\nEND;\nSELECT 1;\n"
        )
        chunks = chunks_of("p.sql", content, dialect="bigquery")
        assert [(c.chunk_type, c.line_start, c.line_end) for c in chunks] == [
            ("sql_procedure", 1, 7),
            ("sql_statement", 8, 8),
        ]

    def test_mysql_delimiter_blocks(self) -> None:
        content = (
            "DELIMITER //\nCREATE PROCEDURE p()\nBEGIN\n  INSERT INTO t SELECT * FROM s;\n"
            "END //\nDELIMITER ;\nSELECT 1;\n"
        )
        chunks = chunks_of("p.sql", content, dialect="mysql")
        assert chunks[0].chunk_type == "sql_procedure" and chunks[0].line_end >= 5

    def test_oracle_blocks_end_at_the_slash(self) -> None:
        content = (
            "CREATE OR REPLACE PACKAGE BODY etl AS\n  PROCEDURE a IS\n  BEGIN\n"
            "    INSERT INTO t1 SELECT * FROM s1;\n  END a;\n  PROCEDURE b IS\n  BEGIN\n"
            "    DELETE FROM t2;\n  END b;\nEND etl;\n/\nSELECT 1 FROM dual;\n"
        )
        chunks = chunks_of("etl.sql", content, dialect="oracle")
        assert [(c.name, c.line_start, c.line_end) for c in chunks] == [
            ("etl", 1, 11),
            (None, 12, 12),
        ]

    def test_a_dollar_body_is_kept_whole_and_split_inside_when_too_big(self) -> None:
        statements = "\n".join(
            f"  INSERT INTO mart.t{n} SELECT a, b, c FROM raw.s{n} WHERE d > {n};"
            for n in range(12)
        )
        content = (
            "CREATE OR REPLACE FUNCTION etl.load() RETURNS void AS $$\nBEGIN\n"
            f"{statements}\nEND;\n$$ LANGUAGE plpgsql;\nSELECT 1;\n"
        )
        whole = chunks_of("f.sql", content, dialect="postgres", max_tokens=512)
        assert whole[0].chunk_type == "sql_function" and whole[0].line_end == 16
        parts = chunks_of("f.sql", content, dialect="postgres", max_tokens=120)
        functions = [c for c in parts if c.name == "etl.load"]
        assert len(functions) > 2
        lines = content.split("\n")
        assert all(lines[c.line_start - 1].strip().startswith("INSERT") for c in functions[1:-1])
        assert all(
            context_of(c, content).startswith("-- CREATE OR REPLACE FUNCTION")
            for c in functions[1:]
        )
        assert {"mart.t5", "raw.s5"} <= {t for c in functions for t in c.tables}

    def test_dbt_models(self) -> None:
        content = (
            "{{ config(materialized='table') }}\n\nwith orders as (\n"
            "    select * from {{ ref('stg_orders') }}\n),\npayments as (\n"
            "    select * from {{ source('stripe', 'payments') }}\n)\n"
            "select o.order_id, sum(p.amount) as amount\nfrom orders o\n"
            "left join payments p on p.order_id = o.order_id\ngroup by 1\n"
        )
        (chunk,) = chunks_of("models/marts/fct_orders.sql", content)
        assert (chunk.chunk_type, chunk.name) == ("dbt_model", "fct_orders")
        assert set(chunk.tables) == {"stg_orders", "stripe.payments"}
        assert {"order_id", "amount"} <= set(chunk.columns)
        parts = chunks_of("models/marts/fct_orders.sql", content, max_tokens=50)
        assert {c.chunk_type for c in parts} == {"dbt_model", "sql_cte"}
        assert chunk_file("analyses/x.sql", content)[0].chunk_type == "sql_statement"

    def test_when_tokenising_fails_the_scanner_still_knows_strings_and_comments(self) -> None:
        content = (
            "CREATE VIEW a AS SELECT 'x;y' AS c; /* ; */\n"
            "CREATE VIEW b AS SELECT 2 -- ;\nFROM t;\n"
            "SELECT 'never closed\n"
        )
        chunks = chunks_of("a.sql", content)
        assert [(c.name, c.line_start, c.line_end) for c in chunks] == [
            ("a", 1, 1),
            ("b", 2, 3),
            (None, 4, 4),
        ]
        assert chunks[1].tables == ("b", "t")

    def test_text_that_cannot_be_tokenised_still_chunks(self) -> None:
        content = "SELECT 1;\nSELECT 'never closed\nFROM t;\nSELECT 2;\n" * 3
        chunks_of("broken.sql", content, max_tokens=30)
        chunks_of("broken.sql", content)

    def test_unknown_dialect_falls_back(self) -> None:
        (chunk,) = chunks_of("a.sql", "select a from t", dialect="no-such-dialect")
        assert chunk.tables == ("t",)

    @pytest.mark.parametrize(
        "dialect",
        ["ansi", "bigquery", "duckdb", "mysql", "oracle", "postgres", "snowflake", "tsql"],
    )
    def test_every_dialect_covers_everything(self, dialect: str) -> None:
        content = SQL_SCRIPT + big_select(20, with_string=True)
        for max_tokens in (30, 80, 256):
            chunks_of("a.sql", content, dialect=dialect, max_tokens=max_tokens)


# -- Python ---------------------------------------------------------------------------------------

PYTHON = '''"""The loader module."""

import os
from pathlib import Path

LIMIT = 10


# Loads one file.
@cache
@other(1)
def load(path: Path) -> str:
    """Read it."""
    return path.read_text()


class Loader(Base):
    """Loads things."""

    retries: int = 3

    def run(self) -> None:
        self.go()

    async def stop(self) -> None:
        pass

    class Inner:
        def deep(self) -> int:
            return 1
'''


def big_function() -> str:
    steps = "\n".join(
        f"    # step {n}\n    value_{n} = compute(value_{n - 1}, factor={n})\n"
        f"    if value_{n} > {n}:\n        log(value_{n})"
        for n in range(1, 25)
    )
    return (
        "def pipeline(value_0: int,\n             factor: int = 2) -> int:\n"
        f'    """Runs every step."""\n{steps}\n'
        '    text = """\n    a multi-line string\n    not to be cut\n    """\n'
        "    return value_24\n"
    )


@pytest.mark.unit
class TestPython:
    def test_module_functions_classes_and_methods(self) -> None:
        chunks = chunks_of("pkg/loader.py", PYTHON)
        found = [(c.chunk_type, c.name, c.parent) for c in chunks]
        assert found == [
            ("python_module", None, None),
            ("python_function", "load", None),
            ("python_class", "Loader", None),
            ("python_function", "Loader.run", "Loader"),
            ("python_function", "Loader.stop", "Loader"),
            ("python_class", "Loader.Inner", "Loader"),
            ("python_function", "Loader.Inner.deep", "Loader.Inner"),
        ]
        module, function, cls = chunks[:3]
        assert "import os" in module.text and "LIMIT = 10" in module.text
        assert function.text.startswith("# Loads one file.\n@cache\n@other(1)\ndef load")
        assert '"""Loads things."""' in cls.text and "retries" in cls.text
        assert "def run" not in cls.text

    def test_a_big_function_is_split_at_its_statements_with_the_def_as_context(self) -> None:
        content = big_function()
        chunks = chunks_of("pkg/pipeline.py", content, max_tokens=120)
        assert len(chunks) > 3
        assert all(c.name == "pipeline" and c.chunk_type == "python_function" for c in chunks)
        assert context_of(chunks[0], content) == ""
        header = "def pipeline(value_0: int,\n             factor: int = 2) -> int:\n"
        assert all(context_of(c, content) == header for c in chunks[1:])
        lines = content.split("\n")
        for chunk in chunks[1:]:
            first = lines[chunk.line_start - 1]
            assert first.startswith("    ") and not first.startswith("     "), first
        string_lines = {i + 1 for i, line in enumerate(lines) if "not to be cut" in line}
        assert not {c.line_start for c in chunks} & (string_lines | {s + 1 for s in string_lines})

    def test_a_syntax_error_falls_back_to_the_generic_chunker(self) -> None:
        chunks = chunks_of("broken.py", "def f(:\n    pass\n\nx = 1\n")
        assert [c.chunk_type for c in chunks] == ["text"]

    def test_chunk_texts_of_functions_parse(self) -> None:
        for chunk in chunks_of("pkg/loader.py", PYTHON):
            if chunk.chunk_type == "python_function" and chunk.parent is None:
                ast.parse(chunk.text)


# -- YAML -----------------------------------------------------------------------------------------

DBT_YAML = """version: 2

# raw sources
sources:
  - name: raw_shop
    tables:
      - name: orders
        columns:
          - name: id
          - name: amount
      - name: customers
  - name: stripe
    tables:
      - name: payments

models:
- name: stg_orders
  description: |
    Staged orders.
    name: not a key
  columns:
    - name: order_id
    - name: amount
- name: stg_customers
  columns:
    - name: customer_id
"""


@pytest.mark.unit
class TestYaml:
    def test_dbt_sources_and_models_entries(self) -> None:
        chunks = chunks_of("models/schema.yml", DBT_YAML)
        found = [(c.chunk_type, c.name) for c in chunks]
        assert found == [
            ("yaml", "version"),
            ("yaml_source", "raw_shop"),
            ("yaml_source", "stripe"),
            ("yaml_model", "stg_orders"),
            ("yaml_model", "stg_customers"),
        ]
        assert chunks[1].tables == ("raw_shop.customers", "raw_shop.orders")
        assert chunks[1].text.startswith("# raw sources\nsources:")
        assert chunks[2].text.startswith("sources:\n  - name: stripe")  # key kept as context
        assert chunks[3].columns == ("amount", "order_id")

    def test_an_entry_over_budget_is_split_with_its_ancestors_as_context(self) -> None:
        tables = "\n".join(
            f"      - name: table_{n}\n        description: the table number {n}" for n in range(30)
        )
        content = f"sources:\n  - name: raw\n    tables:\n{tables}\n"
        chunks = chunks_of("models/src.yml", content, max_tokens=80)
        assert len(chunks) > 2 and {c.name for c in chunks} == {"raw"}
        for chunk in chunks[1:]:
            assert context_of(chunk, content) == "sources:\n  - name: raw\n    tables:\n"
        assert {t for c in chunks for t in c.tables} == {f"raw.table_{n}" for n in range(30)}

    def test_small_plain_keys_are_merged(self) -> None:
        (chunk,) = chunks_of("cfg.yaml", "a: 1\nb: 2\nc:\n  d: 3\n")
        assert chunk.chunk_type == "yaml"


# -- Markdown -------------------------------------------------------------------------------------

MARKDOWN = """Intro paragraph.

# Project

## Install

Run this:

```bash
# not a heading
pip install x
```

Setext Heading
--------------

Body under setext.
"""


@pytest.mark.unit
class TestMarkdown:
    def test_sections_by_heading(self) -> None:
        chunks = chunks_of("README.md", MARKDOWN)
        found = [(c.chunk_type, c.name, c.parent) for c in chunks]
        assert found == [
            ("markdown_section", None, None),
            ("markdown_section", "Install", "Project"),  # the empty "# Project" joins it
            ("markdown_section", "Setext Heading", "Project"),
        ]
        assert chunks[1].text.startswith("# Project\n\n## Install")
        assert "# not a heading" in chunks[1].text
        assert context_of(chunks[2], MARKDOWN) == "# Project\n"

    def test_parts_of_a_long_section_keep_the_heading_path(self) -> None:
        paragraphs = "\n\n".join(f"Paragraph {n} says something useful." for n in range(30))
        content = f"# Guide\n\n## Usage\n\n{paragraphs}\n"
        chunks = chunks_of("docs/guide.md", content, max_tokens=60)
        assert len(chunks) > 3
        assert all(context_of(c, content) == "# Guide\n## Usage\n" for c in chunks[1:])
        lines = content.split("\n")
        assert all(lines[c.line_start - 1].startswith("Paragraph") for c in chunks[1:])


# -- anything else ------------------------------------------------------------------------------


@pytest.mark.unit
class TestGeneric:
    def test_other_files_are_packed_by_paragraph_and_line(self) -> None:
        content = "\n\n".join("\n".join(f"word {p} {n}" for n in range(5)) for p in range(20))
        chunks = chunks_of("notes.txt", content, max_tokens=60)
        assert {c.chunk_type for c in chunks} == {"text"}
        lines = content.split("\n")
        assert all(lines[c.line_start - 1].endswith(" 0") for c in chunks)  # paragraph starts


# -- properties ------------------------------------------------------------------------------------

SQL_PIECES = [
    "SELECT",
    "a",
    "b.c",
    ",",
    "FROM",
    "t",
    "JOIN",
    "u ON u.id = t.id",
    "WHERE",
    "x = 1",
    "GROUP BY 1",
    "UNION ALL",
    "WITH w AS (",
    "(",
    ")",
    ";",
    "\n",
    "\n",
    "\n",
    "\n\n",
    "'str;ing'",
    "'multi\nline'",
    "-- comment ;",
    "/* block\ncomment */",
    "$$",
    "$$ body; \n$$",
    "BEGIN",
    "END",
    "END IF",
    "CASE WHEN",
    "GO",
    "\nGO\n",
    "\n/\n",
    "CREATE PROCEDURE p AS",
    "CREATE VIEW v AS",
    "INSERT INTO t",
    "{{ ref('m') }}",
    "{% if x %}",
    "DECLARE",
    "'",
    '"quoted"',
    "[br]",
    "`bt`",
    "#temp",
    "@v",
    "very_long_identifier_" * 8,
]
PY_PIECES = [
    "def f(x):",
    "class C:",
    "    def m(self):",
    "        return 1",
    "    pass",
    "import os",
    "@deco",
    "# comment",
    '"""doc"""',
    '"""multi',
    'line"""',
    "x = [",
    "  1, 2,",
    "]",
    "if x:",
    "else:",
    "try:",
    "except E:",
    "",
    "",
    "    " + "y = 1 + " * 40 + "1",
]
MD_PIECES = [
    "# Title",
    "## Sub",
    "### Deep",
    "text line",
    "",
    "",
    "- item",
    "1. item",
    "```",
    "```python",
    "~~~",
    "    code",
    "===",
    "---",
    "| a | b |",
    "word " * 60,
]
YAML_PIECES = [
    "sources:",
    "models:",
    "  - name: a",
    "    tables:",
    "      - name: t",
    "    columns:",
    "        - name: c",
    "key: value",
    "  nested: 1",
    "- item",
    "# comment",
    "",
    "desc: |",
    "   text",
    "---",
]

budgets = st.integers(min_value=24, max_value=300)


def joined(pieces: list[str], separators: list[str]) -> st.SearchStrategy[str]:
    return st.lists(
        st.tuples(st.sampled_from(pieces), st.sampled_from(separators)), max_size=120
    ).map(lambda parts: "".join(a + b for a, b in parts))


sqlish = joined(SQL_PIECES, [" ", "\n", "  ", ""])
pyish = joined(PY_PIECES, ["\n"])
mdish = joined(MD_PIECES, ["\n"])
yamlish = joined(YAML_PIECES, ["\n"])
noise = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=400)

PROPERTY = settings(
    max_examples=120,
    deadline=None,
    database=None,  # no example database left in the repository
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.unit
class TestProperties:
    @PROPERTY
    @given(content=sqlish, max_tokens=budgets, dialect=st.sampled_from([None, "tsql", "postgres"]))
    def test_sql(self, content: str, max_tokens: int, dialect: str | None) -> None:
        chunks_of("models/m.sql", content, max_tokens=max_tokens, dialect=dialect)

    @PROPERTY
    @given(content=pyish, max_tokens=budgets)
    def test_python(self, content: str, max_tokens: int) -> None:
        chunks_of("pkg/m.py", content, max_tokens=max_tokens)

    @PROPERTY
    @given(functions=st.lists(st.integers(1, 40), min_size=1, max_size=6), max_tokens=budgets)
    def test_valid_python(self, functions: list[int], max_tokens: int) -> None:
        content = "\n\n".join(
            f"@d\ndef f{k}(a):\n" + "\n".join(f"    a = a + {n}  # step" for n in range(size))
            for k, size in enumerate(functions)
        )
        chunks = chunks_of("pkg/m.py", content, max_tokens=max_tokens)
        assert {c.chunk_type for c in chunks} == {"python_function"}

    @PROPERTY
    @given(content=mdish, max_tokens=budgets)
    def test_markdown(self, content: str, max_tokens: int) -> None:
        chunks_of("docs/m.md", content, max_tokens=max_tokens)

    @PROPERTY
    @given(content=yamlish, max_tokens=budgets)
    def test_yaml(self, content: str, max_tokens: int) -> None:
        chunks_of("models/m.yml", content, max_tokens=max_tokens)

    @PROPERTY
    @given(
        content=noise,
        max_tokens=budgets,
        path=st.sampled_from(["a.sql", "a.py", "a.md", "a.yml", "a.txt"]),
    )
    def test_any_text(self, content: str, max_tokens: int, path: str) -> None:
        chunks_of(path, content, max_tokens=max_tokens)

    @PROPERTY
    @given(content=sqlish, max_tokens=st.integers(min_value=12, max_value=120))
    def test_another_counter(self, content: str, max_tokens: int) -> None:
        chunks_of("m.sql", content, max_tokens=max_tokens, count_tokens=words)


# -- the real tokenizer ---------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.slow
def test_chunks_fit_the_real_embedding_model() -> None:
    from adapters.embeddings import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    limit = embedder.max_tokens
    files = {
        "warehouse/marts/wide_orders.sql": SQL_SCRIPT + big_select(120, with_string=True),
        "pkg/pipeline.py": PYTHON + "\n\n" + big_function() * 3,
        "docs/guide.md": MARKDOWN * 10 + "x" * 5000 + "\n" + "naïve café 東京 " * 200,
        "models/schema.yml": DBT_YAML * 8,
    }
    for path, content in files.items():
        chunks = chunk_file(path, content, max_tokens=limit, count_tokens=embedder.count_tokens)
        assert_complete(path, content, chunks, limit, embedder.count_tokens)
        if not path.endswith(".yml"):  # dbt entries are small: one chunk each
            filled = max(embedder.count_tokens(f"{path}\n{c.text}") for c in chunks)
            assert filled > limit * 0.8, path  # the real count lets big parts fill the model
