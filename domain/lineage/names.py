"""Turning sqlglot table and column nodes into reported names and matching keys."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from domain.lineage.dialects import SqlDialect, output_name
from domain.lineage.jinja import DBT_THIS
from domain.lineage.tokens import NAME_TOKENS, Token, TokenType, keyword

_SYSTEM_SCHEMAS = frozenset({"information_schema", "sys", "pg_catalog"})
_PSEUDO_TABLES = frozenset({"dual", DBT_THIS})
_NOT_NAMES = frozenset(
    {
        "SELECT",
        "TABLE",
        "TABLES",
        "ONLY",
        "LATERAL",
        "UNNEST",
        "INTO",
        "IF",
        "NOT",
        "EXISTS",
        "SET",
        "OF",
        "WHERE",
        "ON",
        "AS",
        "VALUES",
        "DEFAULT",
        "NOWAIT",
        "SKIP",
    }
)
_SKIPPED_BEFORE_NAME = frozenset({"TABLE", "ONLY", "IF", "NOT", "EXISTS"})


@dataclass(frozen=True)
class TableRef:
    """A table as reported (``name``) and as the engine would resolve it (``key``)."""

    name: str
    key: str
    temporary: bool = False

    def column(self, column: str) -> str:
        """The reported ``table.column`` string for one of this table's columns."""
        return f"{self.name}.{column}"


def identifier_output(identifier: exp.Expr) -> str:
    """Reported form of one name part (T-SQL ``#``/``##``/``@`` prefixes kept)."""
    if isinstance(identifier, exp.Identifier):
        return _prefix(identifier) + output_name(identifier.this, bool(identifier.quoted))
    if isinstance(identifier, exp.Parameter):
        return "@" + identifier.name.lower()
    return identifier.name.lower()


def identifier_key(identifier: exp.Expr, dialect: SqlDialect) -> str:
    """Matching key of one name part, following the dialect's case rules."""
    if isinstance(identifier, exp.Identifier):
        return _prefix(identifier) + dialect.key(identifier.this, bool(identifier.quoted))
    if isinstance(identifier, exp.Parameter):
        return "@" + identifier.name.lower()
    return identifier.name.lower()


def _prefix(identifier: exp.Identifier) -> str:
    if identifier.args.get("global_"):
        return "##"
    if identifier.args.get("temporary"):
        return "#"
    return ""


def table_ref(table: exp.Table, dialect: SqlDialect) -> TableRef | None:
    """The :class:`TableRef` of a table node, or None when it is not a named table.

    Table functions, stages (``@stage``), ``dual`` and system catalogs are not tables
    for lineage purposes.
    """
    parts = _name_parts(table)
    if not parts:
        return None
    names = [identifier_output(part) for part in parts]
    keys = [identifier_key(part, dialect) for part in parts]
    if names[-1].lower() in _PSEUDO_TABLES or names[-1].startswith("@@"):
        return None
    if len(names) > 1 and names[-2].lower() in _SYSTEM_SCHEMAS:
        return None
    temporary = names[-1].startswith(("#", "@"))
    return TableRef(name=".".join(names), key=".".join(keys), temporary=temporary)


def _name_parts(table: exp.Table) -> list[exp.Expr]:
    this = table.this
    if isinstance(this, exp.Parameter) and isinstance(this.this, exp.Var):
        return [this]
    last = _dotted(this)
    if not last or any(_is_path(part) for part in last):
        return []
    parts: list[exp.Expr] = []
    for arg in ("catalog", "db"):
        part = table.args.get(arg)
        if isinstance(part, exp.Identifier) and part.this:
            parts.append(part)
        elif part is not None and not isinstance(part, exp.Identifier):
            return []
    return parts + last


def _dotted(node: exp.Expr | None) -> list[exp.Expr]:
    """Identifiers of a name part; T-SQL four-part names arrive as a Dot chain."""
    if isinstance(node, exp.Identifier):
        return [node] if node.this else []
    if isinstance(node, exp.Dot):
        left, right = _dotted(node.this), _dotted(node.expression)
        return left + right if left and right else []
    return []


def _is_path(part: exp.Expr) -> bool:
    """File paths and URLs used as tables (``parquet.`/data/x```, DuckDB ``'f.csv'``)."""
    name = part.name
    return "/" in name or "\\" in name or (bool(part.args.get("quoted")) and "." in name)


def name_key(name: exp.Expr | str, dialect: SqlDialect) -> str:
    """Matching key of a bare identifier (alias, CTE name, column name)."""
    if isinstance(name, str):
        return dialect.key(name, False)
    return identifier_key(name, dialect)


def table_ref_from_tokens(
    tokens: tuple[Token, ...] | list[Token],
    index: int,
    dialect: SqlDialect,
    column_list_allowed: bool = False,
) -> TableRef | None:
    """Read a dotted table name starting at ``tokens[index]`` (None if there is none).

    A name followed by ``(`` is a function call, unless ``column_list_allowed``
    (``INSERT INTO t (a, b)``).
    """
    while index < len(tokens) and keyword(tokens[index]) in _SKIPPED_BEFORE_NAME:
        index += 1
    names: list[str] = []
    keys: list[str] = []
    prefix = ""
    while index < len(tokens):
        token = tokens[index]
        if token.token_type in (TokenType.HASH, TokenType.PARAMETER) and not names:
            prefix += token.text
            index += 1
            continue
        if not _is_name(token):
            break
        quoted = token.token_type == TokenType.IDENTIFIER
        names.append(prefix + output_name(token.text, quoted))
        keys.append(prefix + dialect.key(token.text, quoted))
        prefix = ""
        index += 1
        if index >= len(tokens) or tokens[index].token_type != TokenType.DOT:
            break
        index += 1
    called = index < len(tokens) and tokens[index].token_type == TokenType.L_PAREN
    if not names or (called and not column_list_allowed):
        return None
    temporary = names[-1].startswith(("#", "@"))
    return TableRef(".".join(names), ".".join(keys), temporary)


def _is_name(token: Token) -> bool:
    if token.token_type in NAME_TOKENS:
        return True
    word = keyword(token)
    return word.isidentifier() and word not in _NOT_NAMES
