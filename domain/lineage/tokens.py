"""Tokenising SQL text for statement splitting, and small token predicates."""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import cache

from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType
from sqlglot.tokens import Tokenizer

from domain.lineage.dialects import SqlDialect

STRING_TOKENS = frozenset(
    {
        TokenType.STRING,
        TokenType.RAW_STRING,
        TokenType.HEREDOC_STRING,
        TokenType.NATIONAL_STRING,
        TokenType.BYTE_STRING,
        TokenType.UNICODE_STRING,
    }
)
NAME_TOKENS = frozenset({TokenType.VAR, TokenType.IDENTIFIER})
_NOT_KEYWORDS = STRING_TOKENS | {TokenType.IDENTIFIER, TokenType.NUMBER}
_DELIMITER_LINE = re.compile(r"^[ \t]*DELIMITER[ \t]+(\S+)[ \t]*$", re.IGNORECASE | re.MULTILINE)

__all__ = ["LineIndex", "Token", "TokenError", "TokenType", "keyword", "tokenize"]


def keyword(token: Token) -> str:
    """Upper-cased text of a bare word or symbol token; "" for strings and quoted names."""
    if token.token_type in _NOT_KEYWORDS:
        return ""
    return token.text.upper()


@cache
def _tokenizer_class(dialect_name: str, base: type[Tokenizer]) -> type[Tokenizer]:
    # sqlglot swallows the rest of a statement after command words (CALL, WHILE in
    # BigQuery, GO after ';' in T-SQL...) into one string token; splitting needs them.
    return type(f"Lineage{base.__name__}", (base,), {"COMMANDS": set()})


def tokenize(sql: str, dialect: SqlDialect) -> list[Token]:
    """Tokenise ``sql`` with the dialect's tokenizer (command swallowing disabled).

    Raises:
        TokenError: when the text cannot be tokenised (unterminated string, ...).
    """
    tokenizer_class = _tokenizer_class(dialect.name, dialect.glot.tokenizer_class)
    return tokenizer_class(dialect=dialect.glot).tokenize(sql)


def neutralise_delimiters(text: str) -> str:
    """Turn MySQL client ``DELIMITER //`` sections into ordinary ``;``-terminated text.

    Offsets and line breaks are preserved, so reported line numbers do not move.
    """
    if "delimiter" not in text.lower():
        return text
    pieces: list[str] = []
    position = 0
    delimiter = ";"
    for match in _DELIMITER_LINE.finditer(text):
        pieces.append(_replace_delimiter(text[position : match.start()], delimiter))
        pieces.append(" " * (match.end() - match.start()))
        delimiter = match.group(1)
        position = match.end()
    pieces.append(_replace_delimiter(text[position:], delimiter))
    return "".join(pieces)


def _replace_delimiter(chunk: str, delimiter: str) -> str:
    if delimiter == ";":
        return chunk
    pattern = re.compile(re.escape(delimiter) + r"(?=[ \t]*(?:\n|$))")
    return pattern.sub(lambda m: ";" + " " * (len(m.group(0)) - 1), chunk)


class LineIndex:
    """Maps character offsets of a text to 1-based line numbers."""

    def __init__(self, text: str) -> None:
        self._breaks = [match.start() for match in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        """1-based line number of the character at ``offset``."""
        return bisect_right(self._breaks, offset - 1) + 1
