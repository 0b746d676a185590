"""Intents, their retrieval profiles, the spec's prompts and the validated templates."""

from __future__ import annotations

import pytest

from domain.answering.errors import MissingTemplateVariable
from domain.answering.intents import (
    Intent,
    endpoint,
    lineage_keywords_in,
    mentions_lineage,
    profile,
    usage_type,
)
from domain.answering.prompts import (
    BASE_SYSTEM_PROMPT,
    CITATION_RULES,
    CONFIDENCE_PROMPT,
    GRAPH_QUERY,
    INTENT_ADDITIONS,
    LINEAGE_QUERY,
    PromptTemplate,
    confidence_prompt,
    grounded_system_prompt,
    system_prompt,
    template,
)
from domain.errors import UpstreamError, error_from_dict

pytestmark = pytest.mark.unit


def test_each_intent_has_its_usage_type_and_endpoint():
    assert [usage_type(i) for i in Intent] == [
        "chat_deep",
        "chat_graph",
        "chat_semantic",
        "chat_text",
        "chat_title",
    ]
    assert endpoint("deep") == "/api/chat/deep"


def test_profiles_follow_the_routing_table():
    deep, graph, semantic = profile(Intent.DEEP), profile("graph"), profile(Intent.SEMANTIC)
    assert (deep.top_k, deep.graph_hops, deep.uses_vectors, deep.uses_graph) == (10, 2, True, True)
    assert (graph.top_k, graph.graph_hops, graph.graph_authoritative) == (3, 3, True)
    assert (semantic.top_k, semantic.uses_graph) == (5, False)
    for quiet in (Intent.TEXT, Intent.TITLE):
        assert not profile(quiet).retrieves and profile(quiet).top_k == 0
    assert [profile(i).timeout_s for i in Intent] == [90, 45, 45, 30, 30]
    with pytest.raises(ValueError):
        profile("poetry")


@pytest.mark.parametrize(
    ("question", "lineage"),
    [
        ("What are the upstream sources of customer_summary?", True),
        ("which models are downstream of stg_orders", True),
        ("What does fct_orders depend on? It depends on what?", True),
        ("Does it also feed the finance mart?", True),
        ("Where is net_revenue computed?", False),
        ("Show me the feedback table", False),
    ],
)
def test_lineage_keywords_are_recognised_as_whole_words(question, lineage):
    assert mentions_lineage(question) is lineage


def test_lineage_keywords_are_listed_for_the_warning():
    assert lineage_keywords_in("What reads  from orders, and what is UPSTREAM?") == [
        "reads from",
        "upstream",
    ]


@pytest.mark.spec("LLM-16.1")
def test_every_endpoint_gets_the_base_prompt_then_its_additions():
    assert BASE_SYSTEM_PROMPT.startswith("You are the Financial Lineage Tool assistant.")
    assert "using ONLY the evidence provided in the request context" in BASE_SYSTEM_PROMPT
    assert '"next_actions": [string],' in BASE_SYSTEM_PROMPT
    assert BASE_SYSTEM_PROMPT.endswith(
        "If the user asks for code changes, respond with steps and minimal patches, "
        "grounded in evidence."
    )
    for intent in Intent:
        prompt = system_prompt(intent)
        assert prompt == BASE_SYSTEM_PROMPT + "\n\n" + INTENT_ADDITIONS[intent]
        assert INTENT_ADDITIONS[intent].startswith(f"Additional rules for {intent.value.upper()}:")


@pytest.mark.spec("LLM-17.1")
def test_deep_additions_ask_for_paths_boundaries_and_what_to_verify():
    text = INTENT_ADDITIONS[Intent.DEEP]
    assert "Synthesize across graph evidence + multiple snippets." in text
    assert "(a) the key path(s), (b) the transformation boundary (view/job/model)" in text
    assert "(c) what to verify next" in text


@pytest.mark.spec("LLM-18.1")
def test_graph_additions_put_graph_evidence_first():
    text = INTENT_ADDITIONS[Intent.GRAPH]
    assert "- Answer using graph evidence first. If no graph evidence supports" in text
    assert "(entity names + relationship type). Avoid long prose." in text


@pytest.mark.spec("LLM-19.1")
def test_semantic_additions_recommend_deep_or_graph_and_limit_length():
    text = INTENT_ADDITIONS[Intent.SEMANTIC]
    assert "recommend calling /api/chat/deep or /api/chat/graph in next_actions" in text
    assert 'Keep "answer" under ~1200 characters' in text


@pytest.mark.spec("LLM-20.1")
def test_text_additions_admit_there_is_no_retrieval():
    text = INTENT_ADDITIONS[Intent.TEXT]
    assert "You have no retrieval context. Do not pretend you saw the repo or graph." in text
    assert 'put specific "what I would need" items into next_actions' in text
    assert grounded_system_prompt(Intent.TEXT) == system_prompt(Intent.TEXT)


@pytest.mark.spec("LLM-21.1")
def test_title_additions_ask_for_three_to_seven_words_in_json():
    text = INTENT_ADDITIONS[Intent.TITLE]
    assert "Produce a short title (3\u20137 words)" in text
    assert '{ "answer": "<title>", "evidence": [], "next_actions": [], "warnings": [] }' in text


def test_retrieving_intents_also_get_the_citation_rules():
    for intent in (Intent.DEEP, Intent.GRAPH, Intent.SEMANTIC):
        assert grounded_system_prompt(intent) == system_prompt(intent) + "\n\n" + CITATION_RULES
    assert "[SourceId: " in CITATION_RULES


@pytest.mark.spec("RAG-02", "RAG-04")
def test_confidence_prompt_is_filled_with_summary_question_and_answer():
    assert CONFIDENCE_PROMPT.endswith("Respond with ONLY a number between 0 and 100.")
    filled = confidence_prompt("- models/a.sql", "what feeds a?", "b feeds a {x}")
    expected = (
        "CONTEXT SUMMARY:\n- models/a.sql\n\nQUESTION: what feeds a?\n\nANSWER: b feeds a {x}"
    )
    assert expected in filled
    assert "- 70-89: Answer is mostly supported, minor inferences made" in filled


@pytest.mark.spec("LLM-40.1")
def test_templates_check_their_required_variables():
    prompt = LINEAGE_QUERY.format(context="[SourceId: doc-1:0] select 1", question="what?")
    assert "select 1" in prompt and "QUESTION: what?" in prompt
    assert "PROJECT CONTEXT:\n(none)" in prompt
    with pytest.raises(MissingTemplateVariable) as caught:
        LINEAGE_QUERY.format(question="what feeds orders?")
    assert caught.value.missing == ["context"]
    assert "LINEAGE_QUERY" in caught.value.message
    assert isinstance(caught.value, UpstreamError)
    assert isinstance(error_from_dict(caught.value.to_dict()), MissingTemplateVariable)
    with pytest.raises(MissingTemplateVariable):
        GRAPH_QUERY.format(graph_context="a -[READS_FROM]-> b", question=None)
    assert template("GRAPH_QUERY") is GRAPH_QUERY
    with pytest.raises(KeyError, match="LINEAGE_QUERY"):
        template("NOPE")


def test_a_template_must_declare_exactly_its_placeholders():
    with pytest.raises(ValueError, match="placeholders"):
        PromptTemplate("BROKEN", "Q: {question} C: {context}", frozenset({"question"}))


def test_values_with_braces_are_not_reinterpreted():
    prompt = GRAPH_QUERY.format(graph_context="{not_a_field}", question="q {x}")
    assert "{not_a_field}" in prompt and "q {x}" in prompt


@pytest.mark.spec("LLM-40.2")
def test_lineage_templates_carry_the_hallucination_safeguards():
    for tpl in (LINEAGE_QUERY, GRAPH_QUERY):
        text = tpl.format(context="c", graph_context="g", question="q")
        assert "[file:line]" in text
        assert '"Information not available"' in text
        assert "Do not infer or assume relationships" in text
        assert "Every claim must reference the context" in text
