"""Hybrid confidence, the CITE/ROUTE action and the route target."""

from __future__ import annotations

import pytest

from domain.answering.confidence import (
    NEUTRAL_LLM_SCORE,
    ConfidenceScore,
    action_for,
    coverage,
    hybrid_confidence,
    key_phrases,
    parse_llm_score,
    primary_tag,
    route_target,
)

pytestmark = pytest.mark.unit

CONTEXT = "CREATE VIEW customer_summary AS SELECT * FROM stg_orders JOIN raw.customers"


def test_key_phrases_take_identifiers_and_significant_words_but_not_citations():
    phrases = key_phrases(
        "customer_summary reads from stg_orders [SourceId: doc-1:0] via urn:li:dataset:p:x "
        "and the Revenue numbers"
    )
    assert phrases == ["urn:li:dataset:p:x", "customer_summary", "stg_orders", "revenue", "numbers"]


@pytest.mark.spec("RAG-13")
def test_coverage_is_the_share_of_answer_phrases_found_in_the_context():
    assert coverage("customer_summary reads from stg_orders", CONTEXT) == 1.0
    assert coverage("customer_summary reads from stg_refunds", CONTEXT) == 0.5
    assert coverage("customer_summary joins raw.customers and ledger", CONTEXT) == pytest.approx(
        2 / 4
    )
    assert coverage("", CONTEXT) == 0.0
    assert coverage("the and of", CONTEXT) == 0.0


@pytest.mark.spec("RAG-04", "RAG-14")
def test_hybrid_confidence_weights_retrieval_30_coverage_40_llm_30():
    score = hybrid_confidence([0.8, 0.6], "customer_summary reads from stg_refunds", CONTEXT, 90)
    assert score.retrieval_score == pytest.approx(0.7)
    assert score.coverage_score == 0.5
    assert score.llm_score == 90 and not score.llm_score_assumed
    assert score.overall == int(0.7 * 30 + 0.5 * 40 + 0.9 * 30) == 68
    assert score.to_dict() == {
        "overall": 68,
        "retrieval_score": 0.7,
        "coverage_score": 0.5,
        "llm_score": 90,
        "llm_score_assumed": False,
        "penalty": 0.0,
    }


def test_without_a_self_rating_the_neutral_score_is_used_and_said():
    score = hybrid_confidence([1.0], "customer_summary", CONTEXT, None)
    assert score.llm_score == NEUTRAL_LLM_SCORE and score.llm_score_assumed
    assert score.overall == 30 + 40 + 15


def test_scores_are_clamped_and_empty_retrieval_scores_zero():
    assert hybrid_confidence([1.7, -0.2], "x_y", "x_y", 250).overall == 15 + 40 + 30
    assert hybrid_confidence([], "nothing here", "", 0).overall == 0


def test_a_grounding_penalty_lowers_the_overall_score():
    score = ConfidenceScore(80, 0.9, 0.9, 80).penalized(0.25)
    assert score.overall == 60 and score.penalty == 0.25
    assert ConfidenceScore(80, 0.9, 0.9, 80).penalized(5).overall == 0


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("85", 85),
        ("Score: 72/100", 72),
        ("<think>maybe 10</think> 64%", 64),
        ("0.85", 85),
        ("I'd say 100.", 100),
        ("n/a", None),
        ("999 then 40", 40),
    ],
)
def test_the_llm_self_rating_is_parsed(reply, score):
    assert parse_llm_score(reply) == score


def test_action_is_cite_at_or_above_the_threshold():
    assert action_for(60) == "CITE" and action_for(59) == "ROUTE"
    assert action_for(79, threshold=80) == "ROUTE"


def test_the_primary_tag_is_the_most_common_one():
    assert primary_tag([["finance", "hr"], ["hr"], ["finance"], ["hr"]]) == "hr"
    assert primary_tag([["a", "b"], ["b", "a"]]) == "a"
    assert primary_tag([[], []]) is None


@pytest.mark.spec("RAG-07", "RAG-21")
def test_route_target_with_an_owner():
    owners = {"finance": ("u-7", "fin@example.com")}
    target = route_target([["finance"], ["finance", "hr"]], owners.get, "admin@example.com", 42)
    assert target.to_dict() == {
        "tag": "finance",
        "owner_user_id": "u-7",
        "owner_email": "fin@example.com",
        "reason": "Low confidence: 42%, routing to finance owner",
        "fallback": False,
    }


@pytest.mark.spec("RAG-07", "RAG-22")
@pytest.mark.parametrize(
    ("tags", "owners", "reason"),
    [
        ([[], []], {}, "No tags in context - routing to admin"),
        ([["hr"]], {}, "No owner for tag 'hr' - routing to admin"),
        ([["hr"]], {"hr": ("u-9", None)}, "Owner user not found for tag 'hr' - routing to admin"),
    ],
)
def test_route_target_falls_back_to_the_admin(tags, owners, reason):
    target = route_target(tags, owners.get, "admin@example.com", 30)
    assert (target.tag, target.owner_user_id, target.owner_email) == (
        "system",
        None,
        "admin@example.com",
    )
    assert target.fallback and target.reason == reason
