"""Dialect names accepted by the extractor and identifier case rules per dialect."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from domain.lineage.models import UnknownDialect

SUPPORTED_DIALECTS: tuple[str, ...] = (
    "ansi",
    "bigquery",
    "databricks",
    "duckdb",
    "hive",
    "mysql",
    "oracle",
    "postgres",
    "redshift",
    "snowflake",
    "spark",
    "sparksql",
    "tsql",
)

_ALIASES: dict[str, str] = {
    "": "ansi",
    "sql": "ansi",
    "sparksql": "spark",
    "postgresql": "postgres",
    "mssql": "tsql",
    "sqlserver": "tsql",
}

# Dialects whose statements may legally omit the ``;`` terminator.
SEMICOLON_OPTIONAL: frozenset[str] = frozenset({"tsql"})
# Dialects where ``SELECT ... INTO name`` creates a table (outside procedural bodies).
SELECT_INTO_CREATES_TABLE: frozenset[str] = frozenset({"tsql", "postgres", "redshift"})
# Dialects where ``a.b`` may be field ``b`` of struct column ``a``.
STRUCT_DIALECTS: frozenset[str] = frozenset(
    {"bigquery", "spark", "databricks", "hive", "duckdb", "redshift", "snowflake"}
)
# Dialects where an unqualified column may refer to an earlier alias of the same SELECT.
LATERAL_ALIAS_DIALECTS: frozenset[str] = frozenset(
    {"snowflake", "bigquery", "spark", "databricks", "redshift", "duckdb"}
)


@dataclass(frozen=True)
class SqlDialect:
    """A resolved dialect: our canonical name plus the sqlglot dialect object."""

    name: str
    glot: Dialect

    def key(self, name: str, quoted: bool) -> str:
        """The identifier as the engine resolves it (for matching, never for output)."""
        return _normalised(self.name, name, quoted)


def resolve_dialect(dialect: str | None) -> SqlDialect:
    """Map a user-facing dialect name to a :class:`SqlDialect` or raise UnknownDialect."""
    return _resolve(_canonical_name(dialect))


def _canonical_name(dialect: str | None) -> str:
    if dialect is None:
        return "ansi"
    lowered = dialect.strip().lower()
    canonical = _ALIASES.get(lowered, lowered)
    if canonical not in SUPPORTED_DIALECTS:
        valid = ", ".join(SUPPORTED_DIALECTS)
        raise UnknownDialect(f"unknown SQL dialect {dialect!r}; valid dialects are: {valid}")
    return canonical


@cache
def _resolve(name: str) -> SqlDialect:
    glot = Dialect.get_or_raise(None if name == "ansi" else name)
    return SqlDialect(name=name, glot=glot)


@lru_cache(maxsize=65536)
def _normalised(dialect_name: str, name: str, quoted: bool) -> str:
    glot = _resolve(dialect_name).glot
    identifier = exp.Identifier(this=name, quoted=quoted)
    return glot.normalize_identifier(identifier).name


def output_name(name: str, quoted: bool) -> str:
    """Identifier as reported in the JSON: lower-cased unless it was quoted."""
    return name if quoted else name.lower()
