"""The `where` language: parsing into the neutral tree, refusals, and the Qdrant translation."""

from __future__ import annotations

import pytest
from qdrant_client import models

from adapters.qdrant_collections import to_qdrant_filter
from domain.where_filter import (
    INVALID_JSON_MESSAGE,
    AllOf,
    AnyOf,
    Comparison,
    InvalidWhereFilter,
    Membership,
    fields_of,
    parse_where,
)

pytestmark = pytest.mark.unit


def test_absent_or_empty_filters_filter_nothing():
    assert parse_where(None) is None
    assert parse_where("") is None
    assert parse_where("{}") is None
    assert parse_where({}) is None


def test_a_bare_value_is_equality():
    assert parse_where('{"section_id": "intro"}') == Comparison("section_id", "$eq", "intro")
    assert parse_where({"n": 3}) == Comparison("n", "$eq", 3)
    assert parse_where({"ok": True}) == Comparison("ok", "$eq", True)


def test_several_fields_are_an_implicit_and():
    tree = parse_where({"chapter_id": "1", "doc_type": "paragraph"})
    assert tree == AllOf(
        (Comparison("chapter_id", "$eq", "1"), Comparison("doc_type", "$eq", "paragraph"))
    )


def test_operators():
    assert parse_where({"t": {"$in": ["a", "b"]}}) == Membership("t", ("a", "b"))
    assert parse_where({"t": {"$nin": ["a"]}}) == Membership("t", ("a",), negate=True)
    assert parse_where({"t": {"$ne": "x"}}) == Comparison("t", "$ne", "x")
    assert parse_where({"n": {"$gt": 1, "$lte": 5.5}}) == AllOf(
        (Comparison("n", "$gt", 1), Comparison("n", "$lte", 5.5))
    )


def test_logical_operators_nest():
    tree = parse_where({"$or": [{"chapter": "1"}, {"$and": [{"a": 1}, {"b": {"$lt": 2}}]}]})
    assert tree == AnyOf(
        (
            Comparison("chapter", "$eq", "1"),
            AllOf((Comparison("a", "$eq", 1), Comparison("b", "$lt", 2))),
        )
    )
    assert parse_where({"$and": [{"a": 1}]}) == Comparison("a", "$eq", 1)
    assert fields_of(tree) == {"chapter", "a", "b"}


def test_malformed_json_has_the_spec_message():
    with pytest.raises(InvalidWhereFilter) as caught:
        parse_where("invalid-json-string")
    assert caught.value.message == INVALID_JSON_MESSAGE
    assert caught.value.message == "Invalid 'where' filter: must be valid JSON"


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ('["a"]', "JSON object"),
        ("3", "JSON object"),
        ({"a": {"$regex": "x"}}, "unknown operator '$regex'"),
        ({"$not": [{"a": 1}]}, "unknown operator '$not'"),
        ({"$or": []}, "non-empty array"),
        ({"$or": {"a": 1}}, "non-empty array"),
        ({"$and": [{}]}, "non-empty object"),
        ({"$or": ["a"]}, "non-empty object"),
        ({"a": {}}, "give an operator"),
        ({"a": None}, "not null"),
        ({"a": [1, 2]}, "not an array"),
        ({"a": {"$in": []}}, "non-empty array"),
        ({"a": {"$in": "x"}}, "non-empty array"),
        ({"a": {"$in": [{"b": 1}]}}, "not an object"),
        ({"a": {"$gt": "x"}}, "$gt takes a number"),
        ({"a": {"$lt": True}}, "$lt takes a number"),
        ({"a": float("nan")}, "finite"),
    ],
)
def test_refusals_say_what_is_wrong(raw, words):
    with pytest.raises(InvalidWhereFilter) as caught:
        parse_where(raw)
    assert caught.value.message.startswith("Invalid 'where' filter: ")
    assert words in caught.value.message
    assert caught.value.code == "invalid_where_filter"


def test_nesting_is_bounded():
    raw: dict[str, object] = {"a": 1}
    for _ in range(40):
        raw = {"$and": [raw, {"b": 2}]}
    with pytest.raises(InvalidWhereFilter, match="nested deeper"):
        parse_where(raw)


# -- translation to Qdrant ------------------------------------------------------------------------
def test_equality_becomes_a_match_on_the_metadata_key():
    f = to_qdrant_filter(parse_where({"section_id": "intro"}))
    assert f == models.Filter(
        must=[
            models.FieldCondition(key="metadata.section_id", match=models.MatchValue(value="intro"))
        ]
    )
    assert to_qdrant_filter(None) is None


def test_in_of_strings_is_match_any_and_or_is_should():
    f = to_qdrant_filter(parse_where({"$or": [{"t": {"$in": ["a", "b"]}}, {"n": {"$gte": 2}}]}))
    assert f is not None and f.should is not None and len(f.should) == 2
    first, second = f.should
    assert first == models.FieldCondition(key="metadata.t", match=models.MatchAny(any=["a", "b"]))
    assert second == models.FieldCondition(key="metadata.n", range=models.Range(gte=2.0))


def test_negations_require_the_field_to_exist():
    f = to_qdrant_filter(parse_where({"t": {"$ne": "x"}}))
    assert f is not None and f.must is not None and f.must_not is not None
    exists = f.must[0]
    assert isinstance(exists, models.Filter) and exists.must_not is not None
    assert isinstance(exists.must_not[0], models.IsEmptyCondition)
    assert f.must_not == [
        models.FieldCondition(key="metadata.t", match=models.MatchValue(value="x"))
    ]


def test_mixed_membership_and_float_equality():
    f = to_qdrant_filter(parse_where({"v": {"$in": [1, "a", 2.5]}}))
    assert f is not None and f.should is not None and len(f.should) == 3
    half = to_qdrant_filter(parse_where({"v": 2.5}))
    assert half is not None and half.must == [
        models.FieldCondition(key="metadata.v", range=models.Range(gte=2.5, lte=2.5))
    ]
