"""The pure rules of KG enrichment: the proposal format, resolution to graph URNs,
verification against the parser, the prompt, and the code rebuilt from chunks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domain.chunkers import chunk_file
from domain.file_lineage import extract_file_lineage
from domain.graph import LineageEdge, NodeKind, Rel, node_urn
from domain.kg.code import text_from_chunks
from domain.kg.prompt import SYSTEM_PROMPT, proposal_request
from domain.kg.proposals import (
    ConfidenceSummary,
    LineageEdgeProposal,
    check_proposals,
    proposals_schema,
)
from domain.kg.resolve import resolve_proposals
from domain.kg.verify import verify
from domain.llm import parse_json_object

pytestmark = pytest.mark.unit

LOAD = "etl/load_orders.sql"
LOAD_SQL = "-- nightly load\nINSERT INTO mart.orders\nSELECT id, amount FROM raw.orders;\n"
REPORT = "etl/report.py"
REPORT_PY = '''"""Builds the report from raw.customers (the table name is built at run time)."""


def build(conn, name="customers"):
    rows = conn.execute(f"select * from raw.{name}").fetchall()
    conn.execute("insert into mart.report select * from staging.totals")
    return rows
'''


def proposal(source: str, target: str, kind: str = "READS", confidence: float = 0.8) -> dict:
    return {
        "source_node": source,
        "target_node": target,
        "relationship_type": kind,
        "confidence": confidence,
        "reasoning": "because",
    }


@pytest.mark.spec("LLM-10.7")
def test_a_valid_proposal_has_exactly_the_lineage_edge_proposal_fields():
    checked = check_proposals({"proposals": [proposal("mart.orders", "raw.orders")]})
    assert checked.dropped == {}
    (only,) = checked.valid
    assert only == LineageEdgeProposal("mart.orders", "raw.orders", "READS", 0.8, "because")
    assert set(only.to_dict()) == {
        "source_node",
        "target_node",
        "relationship_type",
        "confidence",
        "reasoning",
    }
    schema = proposals_schema()["properties"]["proposals"]["items"]
    assert schema["properties"]["relationship_type"]["enum"] == ["READS", "WRITES"]
    assert schema["properties"]["confidence"] == {"type": "number", "minimum": 0, "maximum": 1}
    assert schema["required"] == list(only.to_dict())


@pytest.mark.spec("LLM-10.7")
def test_invalid_proposals_are_dropped_and_counted_by_reason():
    items = [
        proposal("a", "b"),
        proposal("a", "b"),  # duplicate
        proposal("a", "b", kind="DELETES"),
        proposal("a", "b", confidence=1.5),
        {**proposal("a", "b"), "confidence": True},
        proposal("a", "a"),
        proposal("  ", "b"),
        {k: v for k, v in proposal("c", "d").items() if k != "reasoning"},
        "not an object",
        proposal("c", "d", kind="writes"),  # case is forgiven
    ]
    checked = check_proposals({"proposals": items})
    assert [(p.source_node, p.relationship_type) for p in checked.valid] == [
        ("a", "READS"),
        ("c", "WRITES"),
    ]
    assert checked.dropped == {
        "bad_confidence": 2,
        "bad_relationship_type": 1,
        "duplicate": 1,
        "empty_node": 1,
        "missing_field": 1,
        "not_an_object": 1,
        "self_loop": 1,
    }
    assert checked.dropped_count == 8
    assert check_proposals({"answer": []}).dropped == {"no_proposals_array": 1}
    capped = check_proposals({"proposals": [proposal(f"s{i}", "t") for i in range(5)]}, 3)
    assert len(capped.valid) == 3 and capped.dropped == {"too_many": 2}


@pytest.mark.spec("LLM-10.2")
def test_the_prompt_carries_the_code_the_context_nodes_and_asks_for_strict_json():
    lineage = extract_file_lineage(LOAD, LOAD_SQL, "p")
    request = proposal_request(LOAD, LOAD_SQL, lineage, max_proposals=5)
    system, user = request.messages
    assert system.role == "system" and "JSON" in system.content and system.content == SYSTEM_PROMPT
    assert f"File: {LOAD}" in user.content and "INSERT INTO mart.orders" in user.content
    assert "- mart.orders (table)" in user.content  # the context nodes
    assert "mart.orders READS raw.orders" in user.content  # what the parser found already
    assert request.response_format == proposals_schema(5)  # strict JSON mode (a schema)
    answer = json.dumps({"proposals": [proposal("mart.orders", "raw.orders")]})
    assert parse_json_object(answer, request.response_format)["proposals"]
    long = proposal_request(LOAD, "x" * 10_000, lineage, max_code_chars=500)
    assert len(long.messages[1].content) < 2_000 and "(truncated)" in long.messages[1].content


def test_names_resolve_to_known_nodes_or_to_datasets_the_code_mentions():
    lineage = extract_file_lineage(REPORT, REPORT_PY, "p")
    valid = check_proposals(
        {
            "proposals": [
                proposal("build", "raw.customers"),  # a function; a table only the code names
                proposal("etl/report.py", "mart.report", "WRITES"),  # the file itself
                proposal("build", "raw.invented"),  # named nowhere: dropped
            ]
        }
    ).valid
    result = resolve_proposals(
        valid, project_id="p", path=REPORT, code=REPORT_PY, known=lineage.nodes
    )
    assert result.dropped == {"unknown_node": 1}
    first, second = (r.edge for r in result.resolved)
    assert first.source == node_urn(NodeKind.PYTHON_FUNCTION, "p", "etl/report.py#build")
    assert first.target == node_urn(NodeKind.TABLE, "p", "raw.customers")
    assert (first.rel, first.provenance, first.confidence) == (Rel.READS_FROM, "llm", 0.8)
    assert (first.line_start, first.line_end) == (1, 1)  # where the code names the table
    assert second.source == node_urn(NodeKind.FILE, "p", REPORT) and second.rel == Rel.WRITES_TO


def test_an_llm_edge_never_takes_the_id_of_the_parser_edge_it_repeats():
    parser = extract_file_lineage(LOAD, LOAD_SQL, "p").edges
    reads = next(e for e in parser if e.rel == Rel.READS_FROM)
    llm = LineageEdge(reads.source, reads.target, reads.rel, "p", LOAD, 3, 3, provenance="llm")
    assert llm.edge_id != reads.edge_id  # a proposal never overwrites the parser's edge
    again = LineageEdge(reads.source, reads.target, reads.rel, "p", LOAD, 1, 1, provenance="llm")
    assert again.edge_id == llm.edge_id  # and the same proposal is the same edge


@pytest.mark.parametrize(
    ("source", "target", "kind", "expected"),
    [
        ("mart.orders", "raw.orders", "READS", "verified"),
        ("etl/load_orders.sql", "mart.orders", "WRITES", "verified"),  # the file runs it
        ("etl/load_orders.sql", "raw.orders", "READS", "verified"),
        ("raw.orders", "mart.orders", "READS", "contradicted"),  # the reverse
        ("etl/load_orders.sql", "mart.orders", "READS", "contradicted"),  # it writes it
    ],
)
def test_verification_against_the_parse_of_the_cited_sql(source, target, kind, expected):
    lineage = extract_file_lineage(LOAD, LOAD_SQL, "p")
    (resolved,) = resolve_proposals(
        check_proposals({"proposals": [proposal(source, target, kind)]}).valid,
        project_id="p",
        path=LOAD,
        code=LOAD_SQL,
        known=lineage.nodes,
    ).resolved
    verdict = verify(resolved.edge, lineage)
    assert verdict.status == expected, verdict.detail
    assert verdict.detail


def test_a_claim_the_parser_cannot_read_is_unverified_and_a_complete_definition_contradicts():
    report = extract_file_lineage(REPORT, REPORT_PY, "p")
    claim = LineageEdge(
        node_urn(NodeKind.PYTHON_FUNCTION, "p", "etl/report.py#build"),
        node_urn(NodeKind.TABLE, "p", "raw.customers"),
        Rel.READS_FROM,
        "p",
        REPORT,
        7,
        7,
        provenance="llm",
    )
    verdict = verify(claim, report)
    assert verdict.status == "unverified" and "not a constant string" in verdict.detail
    view = "models/v.sql"
    lineage = extract_file_lineage(view, "create view mart.v as select a from raw.t", "p")
    extra = LineageEdge(
        node_urn(NodeKind.VIEW, "p", "mart.v"),
        node_urn(NodeKind.TABLE, "p", "raw.other"),
        Rel.READS_FROM,
        "p",
        view,
        1,
        1,
        provenance="llm",
    )
    verdict = verify(extra, lineage)
    assert verdict.status == "contradicted" and "parses completely" in verdict.detail


def test_the_code_is_rebuilt_exactly_from_its_chunks():
    files = [Path("examples/shop/pipelines/export_finance.py"), Path("domain/kg/resolve.py")]
    for path in files:
        text = path.read_text()
        chunks = [c.to_dict() for c in chunk_file(str(path), text, max_tokens=96)]
        assert text_from_chunks(chunks).rstrip("\n") == text.rstrip("\n")
    one_long_line = "select " + ", ".join(f"column_{i}" for i in range(400)) + " from t\n"
    chunks = [c.to_dict() for c in chunk_file("q.sql", one_long_line, max_tokens=64)]
    assert len(chunks) > 1 and text_from_chunks(chunks) == one_long_line.rstrip("\n")


@pytest.mark.spec("LLM-11.3")
def test_the_confidence_summary_is_min_median_max():
    assert ConfidenceSummary.of([0.9, 0.2, 0.5, 0.7]).to_dict() == {
        "min": 0.2,
        "median": 0.6,
        "max": 0.9,
    }
    assert ConfidenceSummary.of([]).text() == "none"
    assert ConfidenceSummary.of([0.4]).text() == "min 0.40 / median 0.40 / max 0.40"
