"""The `where` language of the collections API (Chroma's metadata filters), as a neutral tree.

    {"section_id": "intro"}                                   equality
    {"chapter_id": "1", "doc_type": "paragraph"}              implicit AND of the fields
    {"doc_type": {"$in": ["heading", "paragraph"]}}           $eq $ne $in $nin $gt $gte $lt $lte
    {"$or": [{"chapter": "1"}, {"chapter": "3"}]}             $and / $or of sub-filters

`parse_where` validates a request's filter (a JSON text or an already decoded object) and
returns a tree of `Comparison`, `Membership`, `AllOf` and `AnyOf` nodes, or None when there is
nothing to filter on. Malformed input is refused with `InvalidWhereFilter` (HTTP 400) whose
message starts with "Invalid 'where' filter: " and says what to change. The tree knows no
backend: `adapters.qdrant_collections` translates it into a Qdrant filter, so every filter is
evaluated by the index, never by scanning documents here.

Negations (`$ne`, `$nin`) match documents that have the field with another value; documents
without the field do not match, as in Chroma.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from domain.errors import InvalidCommand, _register

Scalar = str | int | float | bool
CompareOp = Literal["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]

INVALID_JSON_MESSAGE = "Invalid 'where' filter: must be valid JSON"
_PREFIX = "Invalid 'where' filter: "
_COMPARISONS: tuple[str, ...] = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_MEMBERSHIP: tuple[str, ...] = ("$in", "$nin")
_LOGICAL: tuple[str, ...] = ("$and", "$or")
_MAX_DEPTH = 16


class InvalidWhereFilter(InvalidCommand):
    """A `where` filter that is not valid JSON or breaks the filter language. HTTP 400."""

    code = "invalid_where_filter"
    hint = (
        'Send a JSON object, e.g. {"section_id": "intro"}, {"doc_type": {"$in": ["a", "b"]}} '
        'or {"$or": [{"chapter": "1"}, {"chapter": "3"}]}. Operators: $eq, $ne, $in, $nin, '
        "$gt, $gte, $lt, $lte, $and, $or."
    )


_register(InvalidWhereFilter)


@dataclass(frozen=True, slots=True)
class Comparison:
    """`field op value`; ordering operators ($gt...) take numbers only."""

    field: str
    op: CompareOp
    value: Scalar


@dataclass(frozen=True, slots=True)
class Membership:
    """`field` in (or, with `negate`, not in) `values`."""

    field: str
    values: tuple[Scalar, ...]
    negate: bool = False


@dataclass(frozen=True, slots=True)
class AllOf:
    children: tuple[WhereNode, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    children: tuple[WhereNode, ...]


WhereNode = Comparison | Membership | AllOf | AnyOf


def parse_where(raw: str | Mapping[str, Any] | None) -> WhereNode | None:
    """The filter tree of a request's `where`; None when absent or empty."""
    if raw is None:
        return None
    if isinstance(raw, str):
        if not raw.strip():
            return None
        try:
            decoded: Any = json.loads(raw)
        except ValueError:
            raise InvalidWhereFilter(INVALID_JSON_MESSAGE) from None
    else:
        decoded = raw
    if not isinstance(decoded, Mapping):
        raise InvalidWhereFilter(_PREFIX + f"must be a JSON object, not {_kind(decoded)}")
    if not decoded:
        return None
    return _object(decoded, "where", 0)


def fields_of(node: WhereNode | None) -> set[str]:
    """Every metadata field a filter reads (for payload indexes)."""
    if node is None:
        return set()
    if isinstance(node, AllOf | AnyOf):
        return {f for child in node.children for f in fields_of(child)}
    return {node.field}


def _object(obj: Mapping[str, Any], where: str, depth: int) -> WhereNode:
    if depth > _MAX_DEPTH:
        raise InvalidWhereFilter(_PREFIX + f"nested deeper than {_MAX_DEPTH} levels")
    parts: list[WhereNode] = []
    for key, value in obj.items():
        if not isinstance(key, str) or not key:
            raise InvalidWhereFilter(_PREFIX + f"{where} has an empty field name")
        if key in _LOGICAL:
            parts.append(_logical(key, value, f"{where}.{key}", depth))
        elif key.startswith("$"):
            raise InvalidWhereFilter(
                _PREFIX + f"unknown operator {key!r} at {where}; at the top of a filter use "
                "$and or $or, or a field name"
            )
        else:
            parts.append(_field(key, value, f"{where}.{key}"))
    if not parts:
        raise InvalidWhereFilter(_PREFIX + f"{where} is an empty object")
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def _logical(op: str, value: Any, where: str, depth: int) -> WhereNode:
    if not isinstance(value, list) or not value:
        raise InvalidWhereFilter(_PREFIX + f"{op} takes a non-empty array of filters ({where})")
    children: list[WhereNode] = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or not item:
            raise InvalidWhereFilter(
                _PREFIX + f"each item of {op} must be a non-empty object ({where}[{i}])"
            )
        children.append(_object(item, f"{where}[{i}]", depth + 1))
    if len(children) == 1:
        return children[0]
    return AllOf(tuple(children)) if op == "$and" else AnyOf(tuple(children))


def _field(name: str, value: Any, where: str) -> WhereNode:
    if not isinstance(value, Mapping):
        return Comparison(name, "$eq", _scalar(value, where))
    if not value:
        raise InvalidWhereFilter(_PREFIX + f"{where} is an empty object; give an operator")
    parts: list[WhereNode] = []
    for op, operand in value.items():
        at = f"{where}.{op}"
        if op in _COMPARISONS:
            scalar = _scalar(operand, at)
            if op in ("$gt", "$gte", "$lt", "$lte") and not _is_number(scalar):
                raise InvalidWhereFilter(_PREFIX + f"{op} takes a number ({at})")
            parts.append(Comparison(name, op, scalar))
        elif op in _MEMBERSHIP:
            if not isinstance(operand, list) or not operand:
                raise InvalidWhereFilter(_PREFIX + f"{op} takes a non-empty array ({at})")
            values = tuple(_scalar(v, f"{at}[{i}]") for i, v in enumerate(operand))
            parts.append(Membership(name, values, negate=op == "$nin"))
        else:
            known = ", ".join(_COMPARISONS + _MEMBERSHIP)
            raise InvalidWhereFilter(
                _PREFIX + f"unknown operator {op!r} for field {name!r}; use one of {known}"
            )
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def _scalar(value: Any, where: str) -> Scalar:
    if isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidWhereFilter(_PREFIX + f"{where} must be a finite number")
        return value
    raise InvalidWhereFilter(
        _PREFIX + f"{where} must be a string, a number or a boolean, not {_kind(value)}"
    )


def _is_number(value: Scalar) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
