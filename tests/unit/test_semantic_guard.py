"""The semantic cache's guard: paraphrases may share an answer, negations and other names never."""

from __future__ import annotations

import pytest

from domain.semantic_guard import may_reuse_answer

pytestmark = [pytest.mark.unit, pytest.mark.spec("LLM-37.1")]


@pytest.mark.parametrize(
    ("question", "cached"),
    [
        ("What feeds customer_summary?", "what tables feed customer_summary"),
        ("Which models read stg_orders", "Which dbt models read from stg_orders?"),
        ("What's the customer's lifetime revenue?", "what is the customers lifetime revenue"),
        ("Where is `net_revenue` computed?", "Where is net_revenue calculated"),
        ("Does anything read raw.orders", "Does anything read RAW.ORDERS?"),
    ],
)
def test_paraphrases_naming_the_same_things_may_share_an_answer(question, cached):
    assert may_reuse_answer(question, cached).allowed


@pytest.mark.parametrize(
    ("question", "cached", "word"),
    [
        ("Which models read stg_orders?", "Which models do not read stg_orders?", "not"),
        ("Which models don't read stg_orders", "Which models read stg_orders", "not"),
        ("Which models can't be rebuilt", "Which models can be rebuilt", "not"),
        ("Orders without refunds", "Orders with refunds", "without"),
        ("All models except staging ones", "All models and staging ones", "except"),
        ("Models with no owner", "Models with an owner", "no"),
        ("Tables that are never read", "Tables that are read", "never"),
        ("What does not feed x_y", "What does not not feed x_y", "not"),  # counted, not a set
    ],
)
def test_a_question_differing_by_a_negation_is_never_a_hit(question, cached, word):
    verdict = may_reuse_answer(question, cached)
    assert not verdict.allowed
    assert "negation" in verdict.reason and word in verdict.reason


@pytest.mark.parametrize(
    ("question", "cached"),
    [
        ("What feeds customer_summary?", "What feeds customer_ltv?"),
        ("Who reads raw.orders", "Who reads raw.payments"),
        ("Where is `revenue` computed", "Where is `margin` computed"),
        ("What does DailyReport read", "What does WeeklyReport read"),
        ("What feeds Orders?", "What feeds Customers?"),
        ("Top 5 models by lineage depth", "Top 10 models by lineage depth"),
        ("Lineage of models/a.sql", "Lineage of models/b.sql"),
    ],
)
def test_a_question_naming_another_entity_or_identifier_is_never_a_hit(question, cached):
    verdict = may_reuse_answer(question, cached)
    assert not verdict.allowed and "names differ" in verdict.reason


def test_plain_words_that_name_graph_entities_are_told_apart_by_the_lookup():
    entities = {"orders", "customers"}
    asked: list[list[str]] = []

    def is_entity(words: list[str]) -> list[str]:
        asked.append(words)
        return [w for w in words if w in entities]

    assert may_reuse_answer("what feeds orders", "what feeds customers").allowed  # no lookup
    verdict = may_reuse_answer("what feeds orders", "what feeds customers", is_entity)
    assert not verdict.allowed and verdict.reason == "entities differ (customers, orders)"
    assert asked == [["customers", "orders"]]  # only the differing words, stopwords left out
    assert may_reuse_answer("what feeds orders", "which tables feed orders", is_entity).allowed


def test_identical_questions_ask_no_lookup():
    def is_entity(words: list[str]) -> list[str]:
        raise AssertionError("no differing word, nothing to look up")

    assert may_reuse_answer("What feeds x?", "what feeds x", is_entity).allowed
