"""Lineage claims read from an answer and checked against the graph, cited ids against context."""

from __future__ import annotations

import pytest

from domain.answering.grounding import asserted_edges, check_grounding
from tests.unit.answering.helpers import chunk

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("answer", "edges"),
    [
        (
            "customer_summary -[READS_FROM]-> stg_orders",
            [("customer_summary", "READS_FROM", "stg_orders")],
        ),
        (
            "[urn:li:dataset:p:a] -[READS_FROM]-> [urn:li:dataset:p:b]",
            [("urn:li:dataset:p:a", "READS_FROM", "urn:li:dataset:p:b")],
        ),
        (
            "Path: transactions (Table) -> READS_FROM -> customers (Table)",
            [("transactions", "READS_FROM", "customers")],
        ),
        (
            "The customer_summary model reads from stg_orders and stg_customers "
            "[SourceId: doc-1:0].",
            [
                ("customer_summary", "READS_FROM", "stg_orders"),
                ("customer_summary", "READS_FROM", "stg_customers"),
            ],
        ),
        ("stg_orders feeds customer_summary.", [("customer_summary", "READS_FROM", "stg_orders")]),
        (
            "fct_orders depends on stg_orders, stg_payments and raw.customers",
            [
                ("fct_orders", "READS_FROM", "stg_orders"),
                ("fct_orders", "READS_FROM", "stg_payments"),
                ("fct_orders", "READS_FROM", "raw.customers"),
            ],
        ),
        ("fct_orders is built from `stg_orders`", [("fct_orders", "READS_FROM", "stg_orders")]),
        ("load_orders writes to raw.orders", [("load_orders", "WRITES_TO", "raw.orders")]),
        ("stg_orders is upstream of fct_orders", [("fct_orders", "READS_FROM", "stg_orders")]),
        ("fct_orders is downstream of stg_orders", [("fct_orders", "READS_FROM", "stg_orders")]),
        ("The view reads from the orders table. It feeds the mart.", []),
        ("fct_orders does not depend on raw.x", []),
    ],
)
def test_asserted_edges_follow_the_graph_direction(answer, edges):
    assert asserted_edges(answer) == edges


def test_repeated_claims_are_listed_once():
    text = "a_model reads from b_model. b_model feeds a_model. a_model -[READS_FROM]-> b_model"
    assert asserted_edges(text) == [("a_model", "READS_FROM", "b_model")]


def _graph(*pairs):
    known = set(pairs)
    return lambda source, target: (source, target) in known


def test_a_fully_supported_answer_is_grounded_without_penalty():
    source = chunk()
    answer = f"customer_summary reads from stg_orders [SourceId: {source.source_id}]"
    report = check_grounding(
        answer, [source.urn], [source], _graph(("customer_summary", "stg_orders"))
    )
    assert report.grounded and report.penalty == 0 and report.warnings == []
    assert report.supported_edges == [("customer_summary", "READS_FROM", "stg_orders")]
    assert report.citations.source_ids == [source.source_id]


def test_an_edge_missing_from_the_graph_is_a_warning_and_lowers_confidence():
    source = chunk()
    answer = (
        f"customer_summary reads from stg_orders and stg_refunds [SourceId: {source.source_id}]"
    )
    report = check_grounding(answer, [], [source], _graph(("customer_summary", "stg_orders")))
    assert not report.grounded
    assert report.unsupported_edges == [("customer_summary", "READS_FROM", "stg_refunds")]
    assert report.warnings == [
        "Unsupported claim: 'customer_summary READS_FROM stg_refunds' is not an edge of the "
        "lineage graph."
    ]
    assert report.penalty == pytest.approx(0.25)


def test_cited_ids_outside_the_context_are_warnings_and_lower_confidence():
    source = chunk()
    report = check_grounding(
        "see [SourceId: doc-ffffffffffff:1]",
        [source.urn, "urn:li:dataset:p1:orders", "urn:li:dataset:p1:ghost"],
        [source],
        _graph(),
        graph_ids={"urn:li:dataset:p1:orders"},
    )
    assert report.citations.unknown == ["doc-ffffffffffff:1", "urn:li:dataset:p1:ghost"]
    assert len(report.warnings) == 2 and not report.grounded
    assert report.penalty == pytest.approx(0.5 * 2 / 4)


def test_an_answer_citing_nothing_is_not_grounded():
    report = check_grounding("I think it is fine.", [], [chunk()], _graph())
    assert not report.grounded and report.penalty == 0
