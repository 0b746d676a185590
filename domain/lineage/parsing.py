"""Parsing fragments with sqlglot, and a keyword scan for statements it cannot parse."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.parser import Parser

from domain.lineage.dialects import SELECT_INTO_CREATES_TABLE, SqlDialect
from domain.lineage.names import TableRef, table_ref_from_tokens
from domain.lineage.script import Fragment
from domain.lineage.tokens import NAME_TOKENS, Token, TokenType, keyword

_SUBSTITUTES: dict[str, tuple[TokenType, str]] = {
    "PERFORM": (TokenType.SELECT, "SELECT"),
    "REPLACE": (TokenType.INSERT, "INSERT"),
    "UPSERT": (TokenType.INSERT, "INSERT"),
}
_LINEAGE_COMMANDS = frozenset({"SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "MERGE"})
_SOURCE_MARKERS = frozenset({"FROM", "JOIN", "USING", "CLONE", "LIKE"})
_TARGET_MARKERS = frozenset({"UPDATE", "INTO", "OVERWRITE", "MERGE"})


class _DropFallbackNotices(logging.Filter):
    """sqlglot logs a warning for every statement it turns into a Command; we report
    those ourselves."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "contains unsupported syntax" not in record.getMessage()


_glot_logger = logging.getLogger("sqlglot")
if not any(isinstance(existing, _DropFallbackNotices) for existing in _glot_logger.filters):
    _glot_logger.addFilter(_DropFallbackNotices())


@dataclass(frozen=True)
class ParseOutcome:
    """Result of parsing one fragment: an expression, or the reason there is none."""

    expression: exp.Expr | None
    error: str | None = None


def new_parser(dialect: SqlDialect) -> Parser:
    """A sqlglot parser for the dialect (not thread-safe: one per extraction)."""
    return dialect.glot.parser()


def parse_fragment(fragment: Fragment, parser: Parser) -> ParseOutcome:
    """Parse a fragment's tokens into one sqlglot expression; never raises.

    Dialect constructs sqlglot does not know are rewritten first (``PERFORM``,
    ``REPLACE INTO``, T-SQL ``DELETE TOP (n)``); an Oracle ``MERGE`` that fails is
    retried without its ``DELETE WHERE`` clauses.
    """
    tokens = _without_dml_top(_substituted(list(fragment.tokens)))
    outcome = parse_tokens(tokens, fragment.sql, parser)
    if outcome.expression is None and fragment.first_word == "MERGE":
        stripped = _without_merge_delete_where(tokens)
        if len(stripped) < len(tokens):
            retried = parse_tokens(stripped, fragment.sql, parser)
            if retried.expression is not None:
                return retried
    return outcome


def parse_tokens(tokens: list[Token], sql: str, parser: Parser) -> ParseOutcome:
    """Parse tokens into exactly one statement; never raises."""
    try:
        expressions = parser.parse(tokens, sql)
    except (SqlglotError, ValueError, TypeError, AttributeError, KeyError, IndexError) as error:
        return ParseOutcome(None, _first_line(str(error)) or type(error).__name__)
    except RecursionError:
        return ParseOutcome(None, "statement too deeply nested")
    found = [expression for expression in expressions if expression is not None]
    if len(found) != 1:
        return ParseOutcome(None, "no statement found")
    if isinstance(found[0], (exp.Condition, exp.Tuple)) and not isinstance(found[0], exp.Query):
        return ParseOutcome(None, "not a SQL statement")
    return ParseOutcome(found[0])


def _substituted(tokens: list[Token]) -> list[Token]:
    first = tokens[0]
    substitute = _SUBSTITUTES.get(keyword(first))
    if substitute is None:
        return tokens
    if substitute[0] == TokenType.INSERT and (len(tokens) < 2 or keyword(tokens[1]) != "INTO"):
        return tokens
    token_type, text = substitute
    replacement = Token(token_type, text, first.line, first.col, first.start, first.end)
    return [replacement, *tokens[1:]]


def _without_dml_top(tokens: list[Token]) -> list[Token]:
    """T-SQL ``DELETE TOP (n) [PERCENT] FROM t`` / ``UPDATE TOP (n) t``: drop the TOP clause."""
    if len(tokens) < 4 or keyword(tokens[0]) not in ("DELETE", "UPDATE", "INSERT"):
        return tokens
    if keyword(tokens[1]) != "TOP" or tokens[2].token_type != TokenType.L_PAREN:
        return tokens
    depth = 0
    for index in range(2, len(tokens)):
        depth += tokens[index].token_type == TokenType.L_PAREN
        depth -= tokens[index].token_type == TokenType.R_PAREN
        if depth == 0:
            end = index + 1
            if end < len(tokens) and keyword(tokens[end]) == "PERCENT":
                end += 1
            return [tokens[0], *tokens[end:]]
    return tokens


def _without_merge_delete_where(tokens: list[Token]) -> list[Token]:
    """Oracle ``WHEN MATCHED THEN UPDATE SET ... DELETE WHERE cond``: drop ``DELETE WHERE``."""
    kept: list[Token] = []
    skipping = False
    depth = 0
    for index, token in enumerate(tokens):
        depth += token.token_type == TokenType.L_PAREN
        depth -= token.token_type == TokenType.R_PAREN
        word = keyword(token)
        following = keyword(tokens[index + 1]) if index + 1 < len(tokens) else ""
        if depth == 0 and word == "DELETE" and following == "WHERE":
            skipping = True
        elif depth == 0 and word == "WHEN":
            skipping = False
        if not skipping:
            kept.append(token)
    return kept


_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.\w+, text: ([^,]*),[^>]*>")


def _first_line(message: str) -> str:
    if not message.strip():
        return ""
    line = message.strip().splitlines()[0]
    line = _TOKEN_REPR.sub(lambda match: repr(match.group(1)), line)
    return line.replace("'SENTINEL'", "end of statement")[:160]


def is_lineage_command(expression: exp.Expr, fragment: Fragment) -> bool:
    """True when sqlglot fell back to a Command for a statement that moves data."""
    if not isinstance(expression, exp.Command):
        return False
    word = fragment.first_word
    if word in _LINEAGE_COMMANDS:
        return True
    return word == "CREATE" and _creates_table_or_view(fragment.tokens)


def is_insert_exec(fragment: Fragment) -> bool:
    """T-SQL ``INSERT INTO t [(cols)] EXEC proc``: writes ``t`` from a procedure's result."""
    if fragment.first_word != "INSERT":
        return False
    depth = 0
    for token in fragment.tokens:
        depth += token.token_type == TokenType.L_PAREN
        depth -= token.token_type == TokenType.R_PAREN
        if depth == 0 and keyword(token) in ("EXEC", "EXECUTE"):
            return True
    return False


def created_query_start(fragment: Fragment) -> int | None:
    """Index of the query in ``CREATE ... TABLE|VIEW ... AS <query>`` (depth 0), if any."""
    tokens = fragment.tokens
    if fragment.first_word != "CREATE" or not _creates_table_or_view(tokens):
        return None
    depth = 0
    for index, token in enumerate(tokens[:-1]):
        depth += token.token_type == TokenType.L_PAREN
        depth -= token.token_type == TokenType.R_PAREN
        if depth == 0 and keyword(token) == "AS":
            following = tokens[index + 1]
            is_query = keyword(following) in ("SELECT", "WITH")
            if is_query or following.token_type == TokenType.L_PAREN:
                return index + 1
    return None


def _creates_table_or_view(tokens: tuple[Token, ...]) -> bool:
    return any(keyword(token) in ("TABLE", "VIEW") for token in tokens[1:6])


@dataclass(frozen=True)
class ScannedTables:
    """Tables found by the keyword scan of an unparseable statement."""

    sources: list[TableRef]
    targets: list[TableRef]
    temporary: bool = False


def scan_tables(fragment: Fragment, dialect: SqlDialect) -> ScannedTables:
    """Best-effort tables of a statement sqlglot could not parse.

    Names after FROM/JOIN/USING are read, names after INTO/UPDATE/MERGE/TABLE/VIEW
    (in a CREATE) are written; CTE names are ignored.
    """
    tokens = fragment.tokens
    ctes = _cte_names(tokens, dialect)
    sources: list[TableRef] = []
    targets: list[TableRef] = []
    context = _ScanContext(fragment.first_word, fragment.select_only, dialect)
    for index, token in enumerate(tokens):
        role = context.role(keyword(token), index)
        if role == "target" and keyword(token) == "INTO" and not _into_table(tokens, index):
            continue
        if role is None:
            continue
        ref = table_ref_from_tokens(tokens, index + 1, dialect, role == "target")
        if ref is None or ref.key in ctes:
            continue
        (targets if role == "target" else sources).append(ref)
    temporary = fragment.first_word == "CREATE" and any(
        keyword(token) in ("TEMP", "TEMPORARY", "VOLATILE") for token in tokens[1:5]
    )
    return ScannedTables(_unique(sources), _unique(targets), temporary)


def _into_table(tokens: tuple[Token, ...], index: int) -> bool:
    """``INTO`` followed by a table, not ``INTO OUTFILE``/``INTO @var``/``INTO :var``."""
    if index + 1 >= len(tokens):
        return False
    following = tokens[index + 1]
    if following.token_type in (TokenType.PARAMETER, TokenType.COLON):
        return False
    return keyword(following) not in ("OUTFILE", "DUMPFILE")


class _ScanContext:
    """Decides whether the name after a keyword is read or written."""

    def __init__(self, first_word: str, select_only: bool, dialect: SqlDialect) -> None:
        self.first_word = first_word
        self.select_only = select_only
        self.deleting = first_word == "DELETE"
        self.selecting_into_variables = first_word in ("SELECT", "WITH") and (
            dialect.name not in SELECT_INTO_CREATES_TABLE
        )

    def role(self, word: str, index: int) -> str | None:
        if self.deleting and word == "FROM":
            self.deleting = False
            return None if self.select_only else "target"
        if word in _SOURCE_MARKERS:
            return "source"
        if self.select_only or (word == "INTO" and self.selecting_into_variables):
            return None
        if word in _TARGET_MARKERS or (word == "INSERT" and index < 3):
            return "target"
        if self.first_word == "CREATE" and word in ("TABLE", "VIEW") and index < 8:
            return "target"
        return None


def _cte_names(tokens: tuple[Token, ...], dialect: SqlDialect) -> set[str]:
    names: set[str] = set()
    for index in range(len(tokens) - 2):
        before = keyword(tokens[index - 1]) if index else ""
        if before not in ("WITH", ",", "RECURSIVE"):
            continue
        token = tokens[index]
        if token.token_type in NAME_TOKENS and keyword(tokens[index + 1]) in ("AS", "("):
            names.add(dialect.key(token.text, token.token_type == TokenType.IDENTIFIER))
    return names


def _unique(refs: list[TableRef]) -> list[TableRef]:
    seen: set[str] = set()
    unique: list[TableRef] = []
    for ref in refs:
        if ref.name not in seen:
            seen.add(ref.name)
            unique.append(ref)
    return unique
