"""Context serialization with SourceIds and URNs, and the deterministic citation mapping."""

from __future__ import annotations

import re

import pytest

from domain.answering.citations import (
    CITATION_PATTERN,
    Citation,
    map_citations,
    normalize_id,
    snippet_of,
)
from domain.answering.context import (
    ContextSource,
    context_summary,
    document_id_for,
    provenance_label,
    render_context,
)
from tests.unit.answering.helpers import chunk, fact

pytestmark = pytest.mark.unit


def test_document_ids_are_deterministic_and_citable():
    first = document_id_for("urn:li:file:p1:models/orders.sql")
    assert first == document_id_for("urn:li:file:p1:models/orders.sql")
    assert first != document_id_for("urn:li:file:p2:models/orders.sql")
    assert re.fullmatch(r"doc-[0-9a-f]{12}", first)
    assert re.fullmatch(r"[a-zA-Z0-9-]+", first)


def test_a_source_is_built_from_a_vectors_payload():
    payload = {
        "urn": "urn:li:chunk:p1:models/orders.sql#2",
        "file_urn": "urn:li:file:p1:models/orders.sql",
        "path": "models/orders.sql",
        "chunk_index": 2,
        "text": "select 1",
        "chunk_type": "sql_model",
        "line_start": 4,
        "line_end": 9,
        "tags": ["finance"],
        "name": "orders",
    }
    source = ContextSource.from_payload(payload, 0.71)
    doc = document_id_for("urn:li:file:p1:models/orders.sql")
    assert source.source_id == f"{doc}:2"
    assert (source.kind, source.document_name, source.tags) == (
        "chunk",
        "models/orders.sql",
        ("finance",),
    )
    assert source.location == "models/orders.sql:4-9"


@pytest.mark.spec("LLM-28.2", "RAG-10")
def test_context_is_serialized_in_the_spec_format_with_source_ids():
    a = chunk(
        "src/models/transaction.py",
        0,
        "class Transaction(BaseModel): ...",
        0.9,
        chunk_type="python_class",
        lines=(3, 20),
    )
    b = chunk(
        "sql/views/customer_summary.sql",
        1,
        "CREATE VIEW customer_summary AS SELECT ...",
        chunk_type="sql_view",
        lines=None,
    )
    edge = fact("transactions", "customers", confidence=0.95)
    text = render_context([a, b], [edge], "what feeds customer_summary?")
    assert text.index("## Vector Evidence") < text.index("## Graph Evidence")
    assert text.index("## Graph Evidence") < text.index("## User Query")
    assert (
        f"[SourceId: {a.source_id}]\n[{a.urn}]\nFile: src/models/transaction.py\nLines: 3-20\n"
        "Type: python_class\nContent: class Transaction(BaseModel): ..."
    ) in text
    assert (
        f"[SourceId: {b.source_id}]\n[{b.urn}]\nFile: sql/views/customer_summary.sql\n"
        "Type: sql_view\nContent: CREATE VIEW customer_summary AS SELECT ..."
    ) in text
    assert (
        "[urn:li:dataset:p1:transactions] -[READS_FROM]-> [urn:li:dataset:p1:customers]\n"
        "Path: transactions (dbt_model) -> READS_FROM -> customers (dbt_model)\n"
        "Confidence: 0.95\n"
        "Source: deterministic\n"
        "File: models/transactions.sql:3"
    ) in text
    assert text.endswith("## User Query\nwhat feeds customer_summary?")
    for source_id in re.findall(CITATION_PATTERN, text):
        assert source_id in {a.source_id, b.source_id}


@pytest.mark.spec("LLM-18.2")
def test_graph_evidence_can_be_marked_authoritative_and_history_is_included():
    text = render_context([], [fact()], "q", graph_authoritative=True, history="user: hi")
    assert "## Graph Evidence (authoritative" in text
    assert "## Vector Evidence\n(none)" in text
    assert "## Conversation History\nuser: hi" in text
    assert text.index("## Conversation History") < text.index("## User Query")


def test_parser_edges_are_deterministic_and_llm_edges_say_so():
    assert provenance_label("parser") == "deterministic"
    assert provenance_label("llm") == "llm"
    assert "Source: llm" in fact(provenance="llm", confidence=0.7).line()
    assert "Confidence: 1.0" in fact().line()


def test_context_summary_lists_locations_and_edges_without_code():
    summary = context_summary([chunk(text="secret sql")], [fact()])
    assert "models/orders.sql:1-10" in summary
    assert "customer_summary -[READS_FROM]-> stg_orders" in summary
    assert "secret sql" not in summary


@pytest.mark.spec("RAG-03", "RAG-11")
def test_citations_are_extracted_from_the_answer_and_mapped_to_results():
    a, b = chunk(index=0, score=0.9), chunk("models/customers.sql", 3, "x" * 250, 0.6)
    answer = f"orders come from raw [SourceId: {a.source_id}] and [SourceId:{b.source_id}]."
    result = map_citations(answer, [], [a, b])
    assert result.source_ids == [a.source_id, b.source_id]
    first, second = result.citations
    assert (first.document_id, first.chunk_index, first.urn) == (a.document_id, 0, a.urn)
    assert first.document_name == "models/orders.sql" and first.relevance_score == 0.9
    assert second.snippet == "x" * 200 + "..." and second.snippet_full == "x" * 250
    assert first.page_display == "N/A" and first.section_display == "N/A"
    assert result.unknown == [] and result.warnings == []


@pytest.mark.spec("RAG-12")
def test_unknown_source_ids_are_dropped_with_a_warning():
    a = chunk()
    answer = f"[SourceId: {a.source_id}] and [SourceId: doc-000000000000:9]"
    result = map_citations(answer, ["urn:li:chunk:p1:ghost.sql#0"], [a])
    assert result.source_ids == [a.source_id]
    assert result.unknown == ["doc-000000000000:9", "urn:li:chunk:p1:ghost.sql#0"]
    assert len(result.warnings) == 2 and "doc-000000000000:9" in result.warnings[0]


def test_evidence_ids_map_by_urn_source_id_or_file_and_are_deduplicated_in_order():
    a, b = chunk(index=0, score=0.5), chunk(index=1, score=0.9)
    c = chunk("models/customers.sql", 0)
    result = map_citations(
        f"see [SourceId: {c.source_id}]",
        [
            a.urn,
            f"[SourceId: {c.source_id}]",
            "urn:li:file:p1:models/orders.sql",
            a.source_id,
            "urn:li:dataset:p1:stg_orders",
        ],
        [a, b, c],
        graph_ids={"urn:li:dataset:p1:stg_orders"},
    )
    assert result.source_ids == [c.source_id, a.source_id, b.source_id]
    assert result.graph_ids == ["urn:li:dataset:p1:stg_orders"]
    assert result.unknown == []


def test_snippets_and_id_normalisation():
    assert snippet_of("short") == "short"
    assert snippet_of("y" * 201).endswith("...") and len(snippet_of("y" * 201)) == 203
    assert normalize_id(" [SourceId: doc-ab:1] ") == "doc-ab:1"
    assert normalize_id("[urn:li:dataset:p:a]") == "urn:li:dataset:p:a"
    assert Citation.of(chunk()).to_dict()["urn"] == "urn:li:chunk:p1:models/orders.sql#0"
