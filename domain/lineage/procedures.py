"""Vocabulary of procedural SQL, and T-SQL statement boundaries without semicolons.

Used by :mod:`domain.lineage.script` to recover the DML/DDL statements of stored
procedures, functions, triggers and scripts (T-SQL, Snowflake Scripting, BigQuery
scripting, PL/pgSQL, PL/SQL, MySQL compound statements).
"""

from __future__ import annotations

# First words of statements that may carry lineage and are handed to sqlglot.
STATEMENT_WORDS = frozenset(
    {
        "SELECT",
        "WITH",
        "INSERT",
        "UPDATE",
        "DELETE",
        "MERGE",
        "CREATE",
        "ALTER",
        "DROP",
        "TRUNCATE",
        "REPLACE",
        "UPSERT",
        "COPY",
        "LOAD",
        "CACHE",
        "VALUES",
        "FROM",
        "EXPORT",
        "DECLARE",
        "PERFORM",
        "RENAME",
        "TABLE",
    }
)

# Statements without lineage of their own; queries nested in them still count as reads.
NO_LINEAGE_WORDS = frozenset(
    {
        "ANALYZE",
        "ASSERT",
        "BACKUP",
        "BREAK",
        "CALL",
        "CHECKPOINT",
        "CLOSE",
        "CLUSTER",
        "COMMENT",
        "COMMIT",
        "CONTINUE",
        "DBCC",
        "DEALLOCATE",
        "DENY",
        "DESC",
        "DESCRIBE",
        "DISABLE",
        "DISCARD",
        "ENABLE",
        "EXIT",
        "EXPLAIN",
        "FETCH",
        "GET",
        "GOTO",
        "GRANT",
        "ITERATE",
        "KILL",
        "LEAVE",
        "LET",
        "LIST",
        "LISTEN",
        "LOCK",
        "MSCK",
        "NOTIFY",
        "NULL",
        "OPEN",
        "OPTIMIZE",
        "PREPARE",
        "PRINT",
        "PROMPT",
        "PUT",
        "RAISE",
        "RAISERROR",
        "REFRESH",
        "REINDEX",
        "REMOVE",
        "RESET",
        "RESIGNAL",
        "RESTORE",
        "RETURN",
        "REVOKE",
        "ROLLBACK",
        "SAVE",
        "SET",
        "SHOW",
        "SIGNAL",
        "SPOOL",
        "START",
        "THROW",
        "UNCACHE",
        "UNLOCK",
        "UNSET",
        "USE",
        "VACUUM",
        "WAITFOR",
        "WHENEVER",
    }
)

# Statements whose string argument may itself be SQL (dynamic SQL, anonymous blocks).
DYNAMIC_SQL_WORDS = frozenset({"EXEC", "EXECUTE", "DO", "UNLOAD"})
# Words allowed between a dynamic-SQL keyword and its string literal.
DYNAMIC_SQL_PREFIX = frozenset(
    {"IMMEDIATE", "(", "SP_EXECUTESQL", "SYS", "DBO", ".", "LANGUAGE", "PLPGSQL", "SQL"}
)

# Words that open a condition, mapped to (words that close it, whether to consume them).
CONDITION_WORDS: dict[str, tuple[frozenset[str], bool]] = {
    "ELSIF": (frozenset({"THEN"}), True),
    "ELSEIF": (frozenset({"THEN"}), True),
    "WHEN": (frozenset({"THEN"}), True),
    "FOR": (frozenset({"LOOP", "DO"}), True),
    "UNTIL": (frozenset({"END"}), False),
    "CASE": (frozenset({"WHEN"}), False),
    "FORALL": (frozenset({"INSERT", "UPDATE", "DELETE", "MERGE"}), False),
}

# Words that may follow END and belong to it (END IF, END TRY, ...).
BLOCK_END_SUFFIXES = frozenset({"IF", "LOOP", "WHILE", "FOR", "REPEAT", "CASE", "TRY", "CATCH"})
# Words after BEGIN that make it a transaction statement rather than a block.
TRANSACTION_WORDS = frozenset({"TRANSACTION", "TRAN", "WORK", "DISTRIBUTED", "ISOLATION"})
# Routine-defining words and the statement kind they produce.
ROUTINE_KINDS: dict[str, str] = {
    "PROCEDURE": "procedure",
    "PROC": "procedure",
    "FUNCTION": "function",
    "TRIGGER": "trigger",
    "PACKAGE": "package",
}
# LANGUAGE values whose bodies are not SQL.
NON_SQL_LANGUAGES = frozenset(
    {
        "JAVASCRIPT",
        "JS",
        "PYTHON",
        "JAVA",
        "SCALA",
        "PLV8",
        "PLPYTHONU",
        "PLPYTHON3U",
        "PLPERL",
        "PLPERLU",
        "C",
        "R",
    }
)

_TSQL_STARTS = frozenset(
    {
        "SELECT",
        "INSERT",
        "UPDATE",
        "DELETE",
        "MERGE",
        "WITH",
        "DECLARE",
        "SET",
        "IF",
        "ELSE",
        "WHILE",
        "BEGIN",
        "END",
        "EXEC",
        "EXECUTE",
        "CREATE",
        "ALTER",
        "DROP",
        "TRUNCATE",
        "RETURN",
        "PRINT",
        "RAISERROR",
        "THROW",
        "COMMIT",
        "ROLLBACK",
        "SAVE",
        "USE",
        "OPEN",
        "CLOSE",
        "FETCH",
        "DEALLOCATE",
        "GOTO",
        "BREAK",
        "CONTINUE",
        "WAITFOR",
        "GRANT",
        "REVOKE",
        "DENY",
        "BULK",
        "CHECKPOINT",
        "DBCC",
    }
)
_SET_OPERATORS = frozenset({"UNION", "ALL", "EXCEPT", "INTERSECT", "MINUS", "DISTINCT"})
_DML_AFTER = frozenset({"THEN", "ON", "FOR", "AFTER", "OF", "INSTEAD", ",", "BULK", "NOT"})
_DDL_OBJECTS = frozenset(
    {
        "TABLE",
        "VIEW",
        "PROCEDURE",
        "PROC",
        "FUNCTION",
        "INDEX",
        "SCHEMA",
        "DATABASE",
        "TRIGGER",
        "SEQUENCE",
        "TYPE",
        "SYNONYM",
        "COLUMN",
        "CONSTRAINT",
        "DROP",
        "STATISTICS",
        "USER",
        "ROLE",
        "LOGIN",
    }
)
_MAIN_STATEMENTS = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "MERGE"})


def tsql_starts_statement(word: str) -> bool:
    """True when ``word`` can begin a T-SQL statement."""
    return word in _TSQL_STARTS


class TsqlStatementState:
    """Tracks one T-SQL statement to tell where it ends when no ``;`` is written.

    T-SQL lets statements follow each other without terminators, so a keyword such as
    ``SELECT`` or ``SET`` either continues the statement (``INSERT ... SELECT``,
    ``UPDATE ... SET``) or starts the next one. Only words at parenthesis depth 0
    are fed to this state.
    """

    def __init__(self, first: str) -> None:
        self.first = first
        self.expects_query = first == "INSERT"
        self.awaiting_set = first == "UPDATE"
        self.main_seen = first != "WITH"

    def ends_before(self, word: str, previous: str) -> bool:
        """True when ``word`` (preceded by ``previous``) starts a new statement."""
        if word not in _TSQL_STARTS:
            return False
        return not self._continues(word, previous)

    def _continues(self, word: str, previous: str) -> bool:
        if self.first in ("GRANT", "REVOKE", "DENY"):
            return True
        if previous in _SET_OPERATORS:
            return word in ("SELECT", "WITH")
        if not self.main_seen and word in _MAIN_STATEMENTS:
            return True
        if word in ("INSERT", "UPDATE", "DELETE"):
            return self.first == "MERGE" or previous in _DML_AFTER
        if word == "SELECT":
            return self.expects_query or previous in ("AS", "FOR")
        if word == "SET":
            return self.awaiting_set or self.first == "ALTER" or previous in ("DELETE", "UPDATE")
        if word in ("EXEC", "EXECUTE"):
            return self.expects_query or previous == "WITH"
        return self._continues_other(word, previous)

    def _continues_other(self, word: str, previous: str) -> bool:
        if word == "WITH":
            return True
        if word == "IF":
            return previous in _DDL_OBJECTS
        if word == "FETCH":
            return previous in ("ROW", "ROWS")
        if word == "ALTER" and previous == "OR":
            return True
        return word in ("DROP", "ALTER") and self.first == "ALTER"

    def consume(self, word: str) -> None:
        """Record a depth-0 word that belongs to the statement."""
        if not self.main_seen and word in _MAIN_STATEMENTS:
            self.main_seen = True
        if word == "INSERT":
            self.expects_query = True
        elif word in ("SELECT", "VALUES", "EXEC", "EXECUTE"):
            self.expects_query = False
        elif word == "UPDATE":
            self.awaiting_set = True
        elif word == "SET":
            self.awaiting_set = False
        elif word == "AS" and self.first in ("CREATE", "ALTER"):
            self.expects_query = True
