"""Reading the model's JSON answer, the safe fallback, and titles."""

from __future__ import annotations

import json

import pytest

from domain.answering.parsing import (
    SAFE_FALLBACK_ANSWER,
    clamp_title,
    parse_answer,
    safe_fallback,
    strip_reasoning,
    title_words_ok,
    try_parse_answer,
)

pytestmark = pytest.mark.unit

GOOD = {
    "answer": "orders reads from raw.orders",
    "evidence": [{"type": "graph", "id": "urn:li:dataset:p:orders", "note": "edge"}],
    "next_actions": ["inspect raw.orders"],
    "warnings": [],
}


def test_a_contract_answer_is_parsed():
    parsed = parse_answer(json.dumps(GOOD))
    assert parsed is not None
    assert parsed.to_dict() == GOOD
    assert parsed.evidence_ids == ["urn:li:dataset:p:orders"]


def test_reasoning_and_code_fences_are_removed_before_parsing():
    raw = "<think>let me see {not json}</think>\n```json\n" + json.dumps(GOOD) + "\n```"
    assert strip_reasoning(raw) == json.dumps(GOOD)
    assert parse_answer(raw) is not None
    chatty = "Sure! Here it is:\n" + json.dumps(GOOD) + "\nHope that helps {really}."
    assert parse_answer(chatty).answer == GOOD["answer"]


def test_missing_notes_and_string_evidence_are_tolerated():
    data = dict(
        GOOD,
        evidence=[
            {"type": "chunk", "id": "doc-1:0"},
            "urn:li:file:p:a.sql",
            {"type": "weird", "id": "urn:li:dataset:p:x"},
            {"note": "no id"},
        ],
    )
    parsed = parse_answer(json.dumps(data))
    assert [(e.type, e.id, e.note) for e in parsed.evidence] == [
        ("chunk", "doc-1:0", ""),
        ("doc", "urn:li:file:p:a.sql", ""),
        ("graph", "urn:li:dataset:p:x", ""),
    ]
    assert parsed.problems == ("evidence item 3 has no id; dropped",)


@pytest.mark.spec("LLM-16.2")
@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("not json at all", "no JSON object"),
        (json.dumps({"answer": "x", "evidence": []}), "missing keys: next_actions, warnings"),
        (json.dumps(dict(GOOD, answer=["x"])), "'answer' is not a string"),
        (json.dumps(dict(GOOD, warnings="none")), "'warnings' is not a list"),
        ("<think>{" + '"answer": "x"', "no JSON object"),
    ],
)
def test_malformed_output_gives_the_safe_fallback(raw, reason):
    parsed, why = try_parse_answer(raw)
    assert parsed is None and why.startswith(reason)
    fallback = safe_fallback(why)
    assert set(fallback) == {"answer", "evidence", "next_actions", "warnings"}
    assert fallback["answer"] == SAFE_FALLBACK_ANSWER and fallback["evidence"] == []
    assert fallback["warnings"] == [f"Malformed LLM output: {why}"]


@pytest.mark.spec("LLM-21.1")
@pytest.mark.parametrize(
    ("raw", "title"),
    [
        ('"Upstream Sources of Customer Summary."', "Upstream Sources of Customer Summary"),
        ("Title: **Orders lineage**", "Question about Orders lineage"),
        ("one two three four five six seven eight nine", "one two three four five six seven"),
        (
            json.dumps({"answer": "Revenue model dependencies", "evidence": []}),
            "Revenue model dependencies",
        ),
        ("", "Untitled lineage question"),
    ],
)
def test_titles_are_clamped_to_three_to_seven_words(raw, title):
    assert clamp_title(raw) == title
    assert title_words_ok(clamp_title(raw))


def test_title_word_bounds():
    assert not title_words_ok("two words")
    assert title_words_ok("three short words")
    assert not title_words_ok("a b c d e f g h")
