"""Entity mentions for graph lookups, and the topic that carries follow-up questions."""

from __future__ import annotations

import pytest

from domain.answering.entities import entity_candidates, is_entity_like
from domain.answering.topic import (
    ACCUMULATED_TOPIC,
    RAW_FIRST_MESSAGE,
    STRATEGY_LOG,
    accumulate_topic,
    retrieval_text,
    topic_terms,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("question", "strong"),
    [
        ("What are the upstream sources of customer_summary?", ["customer_summary"]),
        ("which models break if `stg_orders` changes?", ["stg_orders"]),
        (
            "where is net_revenue computed in analytics.fct_orders",
            ["net_revenue", "analytics.fct_orders", "fct_orders"],
        ),
        ("does the orders table feed the view Daily?", ["orders", "Daily"]),
        (
            'Show lineage of CustomerSummary and "daily revenue"',
            ["daily revenue", "CustomerSummary"],
        ),
        ("what feeds it?", []),
    ],
)
def test_strong_entity_candidates(question, strong):
    assert entity_candidates(question, include_plain_words=False) == strong


def test_plain_words_follow_and_duplicates_differ_only_by_case():
    names = entity_candidates("Does Orders feed orders and ORDERS_daily or revenue?")
    assert names == ["ORDERS_daily", "Orders", "revenue"]
    assert "feed" not in names and "Does" not in names


def test_identifier_shapes():
    assert is_entity_like("stg_orders") and is_entity_like("raw.orders")
    assert is_entity_like("CustomerSummary") and not is_entity_like("orders")


@pytest.mark.spec("PRV-03.1", "PRV-03.4")
def test_a_first_message_is_embedded_raw():
    for topic in (None, "", "   \n"):
        text, strategy = retrieval_text("  What feeds customer_summary?  ", topic)
        assert (text, strategy) == ("What feeds customer_summary?", RAW_FIRST_MESSAGE)
    assert STRATEGY_LOG[RAW_FIRST_MESSAGE] == "first message (raw query)"


@pytest.mark.spec("PRV-03.2", "PRV-03.4")
def test_a_follow_up_is_embedded_as_the_accumulated_topic():
    topic = accumulate_topic(None, "What are the upstream sources of customer_summary?")
    assert topic == "upstream sources customer_summary"
    text, strategy = retrieval_text("Which columns does it use?", topic)
    assert strategy == ACCUMULATED_TOPIC
    assert text == "upstream sources customer_summary columns use"
    assert STRATEGY_LOG[ACCUMULATED_TOPIC] == "follow-up (contextualized topic)"


@pytest.mark.spec("PRV-03.3")
def test_a_pronoun_follow_up_still_carries_the_entity():
    topic = accumulate_topic(None, "What are the upstream sources of customer_summary?")
    text, _ = retrieval_text("does it also feed the finance mart?", topic)
    assert "customer_summary" in text and "finance mart" in text
    assert "it" not in text.split()


def test_a_long_topic_drops_old_plain_words_before_identifiers():
    topic = accumulate_topic(None, "lineage of customer_summary")
    grown = accumulate_topic(topic, " ".join(f"word{i}" for i in range(200)), max_chars=120)
    assert len(grown) <= 120
    assert grown.startswith("customer_summary ")
    assert grown.endswith("word199") and "lineage" not in grown


def test_topic_terms_keep_identifiers_whole():
    assert topic_terms("Is raw.orders read by stg-orders_v2?") == [
        "raw.orders",
        "read",
        "stg-orders_v2",
    ]
