"""Minimal dbt/Jinja neutralisation so that simple dbt models still parse as SQL.

Full dbt compilation happens elsewhere; this only keeps the extractor from crashing:
``{{ ref('m') }}`` becomes ``m``, ``{{ source('s', 't') }}`` becomes ``s.t``, comments
and other tags are dropped. Line breaks inside removed tags are preserved so that the
line numbers reported for statements still match the original file.
"""

from __future__ import annotations

import re

_COMMENT = re.compile(r"\{#.*?#\}", re.DOTALL)
_EXPRESSION = re.compile(r"\{\{-?(.*?)-?\}\}", re.DOTALL)
_STATEMENT = re.compile(r"\{%-?(.*?)-?%\}", re.DOTALL)
_ARG = r"\s*['\"]([^'\"]+)['\"]\s*"
_REF = re.compile(rf"^\s*ref\s*\((?:{_ARG},)?{_ARG}(?:,[^)]*)?\)\s*$", re.DOTALL)
_SOURCE = re.compile(rf"^\s*source\s*\({_ARG},{_ARG}\)\s*$", re.DOTALL)
_THIS = re.compile(r"^\s*this\s*$")

DBT_THIS = "__dbt_this__"
"""Stand-in for ``{{ this }}`` (the model itself); the extractor never reports it."""


def has_jinja(text: str) -> bool:
    """True when the text contains Jinja expression or statement tags."""
    return "{{" in text or "{%" in text or "{#" in text


def strip_jinja(text: str) -> str:
    """Replace dbt ``ref``/``source`` calls by table names and drop every other tag."""
    text = _COMMENT.sub(_blank, text)
    text = _STATEMENT.sub(_blank, text)
    return _EXPRESSION.sub(_render_expression, text)


def _blank(match: re.Match[str]) -> str:
    return "\n" * match.group(0).count("\n")


def _render_expression(match: re.Match[str]) -> str:
    body = match.group(1)
    newlines = "\n" * match.group(0).count("\n")
    ref = _REF.match(body)
    if ref:
        return ref.group(2) + newlines
    source = _SOURCE.match(body)
    if source:
        return f"{source.group(1)}.{source.group(2)}" + newlines
    if _THIS.match(body):
        return DBT_THIS + newlines
    return newlines
