"""Splitting SQL scripts into simple statements, looking through procedural code.

sqlglot parses one statement at a time and gives up on most procedural code. The
:class:`ScriptWalker` walks the token stream instead: it skips control flow (``IF``,
``BEGIN``/``END``, ``TRY``/``CATCH``, loops, exception handlers, declarations),
recognises stored-routine definitions and the bodies inside ``$$``-quoted strings,
and yields the DML/DDL statements it finds as :class:`Fragment` objects, each with
its own tokens, ready for sqlglot's parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from domain.lineage.dialects import SEMICOLON_OPTIONAL, SqlDialect
from domain.lineage.procedures import (
    BLOCK_END_SUFFIXES,
    CONDITION_WORDS,
    DYNAMIC_SQL_PREFIX,
    DYNAMIC_SQL_WORDS,
    NO_LINEAGE_WORDS,
    NON_SQL_LANGUAGES,
    ROUTINE_KINDS,
    STATEMENT_WORDS,
    TRANSACTION_WORDS,
    TsqlStatementState,
    tsql_starts_statement,
)
from domain.lineage.tokens import (
    NAME_TOKENS,
    STRING_TOKENS,
    Token,
    TokenError,
    TokenType,
    keyword,
    tokenize,
)

_MAX_NESTING = 6
_ROUTINE_PREFIX = frozenset(
    {
        "OR",
        "REPLACE",
        "ALTER",
        "SECURE",
        "TEMP",
        "TEMPORARY",
        "EDITIONABLE",
        "NONEDITIONABLE",
        "AGGREGATE",
        "CONSTRAINT",
        "EXTERNAL",
        "DEFINER",
        "=",
    }
)
_CHUNK_END = re.compile(r";[ \t]*(?:--[^\n]*)?\n|\n[ \t]*GO[ \t]*(?:\n|$)", re.IGNORECASE)


@dataclass(frozen=True)
class Fragment:
    """One simple statement found in the text, as a slice of tokens.

    ``sql`` is the text the token offsets refer to (a routine body may be the content
    of a string literal) and ``base`` is where that text starts in the script.
    ``select_only`` marks queries recovered from conditions, declarations and
    assignments: only the tables they read matter. ``variables`` holds the
    (lower-cased) names of procedural variables and parameters in scope, which are
    not columns.
    """

    tokens: tuple[Token, ...]
    sql: str
    base: int
    in_body: bool = False
    select_only: bool = False
    variables: frozenset[str] = frozenset()

    @property
    def start(self) -> int:
        """Offset of the first character in the script."""
        return self.base + self.tokens[0].start

    @property
    def end(self) -> int:
        """Offset of the last character in the script."""
        return self.base + self.tokens[-1].end

    @property
    def first_word(self) -> str:
        """Upper-cased first keyword of the statement."""
        return keyword(self.tokens[0])

    def text(self) -> str:
        """The statement's source text."""
        return self.sql[self.tokens[0].start : self.tokens[-1].end + 1]


@dataclass(frozen=True)
class Routine:
    """A stored procedure, function, trigger or package and the statements of its body."""

    kind: str
    name: str
    start: int
    end: int
    items: tuple[Item, ...] = field(default=())
    on_table: tuple[Token, ...] = ()


@dataclass(frozen=True)
class Problem:
    """A stretch of text that could not even be tokenised."""

    start: int
    end: int
    message: str


Item = Fragment | Routine | Problem


def split_script(text: str, dialect: SqlDialect) -> list[Item]:
    """Split a whole SQL text into fragments, routines and problems, in text order."""
    try:
        tokens = tokenize(text, dialect)
    except TokenError:
        return _split_in_chunks(text, dialect)
    return ScriptWalker(dialect, tokens, text, base=0).run()


def split_plainly(text: str, dialect: SqlDialect) -> list[Item]:
    """Fallback splitting on ``;`` only, without looking into procedural code."""
    items: list[Item] = []
    for start, chunk in _chunks(text):
        try:
            tokens = tokenize(chunk, dialect)
        except TokenError as error:
            items.append(_problem(chunk, start, error))
            continue
        statement: list[Token] = []
        for token in [*tokens, None]:
            if token is None or token.token_type == TokenType.SEMICOLON:
                if statement:
                    items.append(Fragment(tuple(statement), chunk, start))
                statement = []
            else:
                statement.append(token)
    return items


def _chunks(text: str) -> list[tuple[int, str]]:
    chunks: list[tuple[int, str]] = []
    position = 0
    for match in [*_CHUNK_END.finditer(text), None]:
        end = match.end() if match else len(text)
        if text[position:end].strip():
            chunks.append((position, text[position:end]))
        position = end
    return chunks


def _problem(chunk: str, base: int, error: TokenError) -> Problem:
    stripped = len(chunk) - len(chunk.lstrip())
    message = f"could not tokenise SQL: {str(error).splitlines()[0][:120]}"
    return Problem(base + stripped, base + len(chunk.rstrip()) - 1, message)


def _split_in_chunks(text: str, dialect: SqlDialect) -> list[Item]:
    items: list[Item] = []
    for start, chunk in _chunks(text):
        try:
            tokens = tokenize(chunk, dialect)
        except TokenError as error:
            items.append(_problem(chunk, start, error))
            continue
        items.extend(ScriptWalker(dialect, tokens, chunk, base=start).run())
    return items


class ScriptWalker:
    """Walks a token stream and collects the statements hidden in (procedural) SQL."""

    def __init__(
        self,
        dialect: SqlDialect,
        tokens: list[Token],
        sql: str,
        base: int,
        in_body: bool = False,
        nesting: int = 0,
        variables: set[str] | None = None,
    ) -> None:
        self.variables: set[str] = set() if variables is None else variables
        self.dialect = dialect
        self.tokens = tokens
        self.sql = sql
        self.base = base
        self.in_body = in_body
        self.nesting = nesting
        self.items: list[Item] = []
        self._tsql = dialect.name in SEMICOLON_OPTIONAL
        self._blocks = 0
        self._declaring = False

    # -- driving loop -------------------------------------------------------------

    def run(self) -> list[Item]:
        """Walk every token; return what was found."""
        index = 0
        while index < len(self.tokens):
            index = max(self._step(index), index + 1)
        return self.items

    def _step(self, i: int) -> int:
        token = self.tokens[i]
        if token.token_type == TokenType.SEMICOLON or self._is_separator(i):
            return i + 1
        label = self._label_length(i)
        if label:
            return i + label
        kind_index = self._routine_kind_index(i)
        if kind_index is not None:
            return self._routine(i, kind_index)
        return self._control_or_statement(i, keyword(token))

    def _control_or_statement(self, i: int, word: str) -> int:
        if word == "BEGIN":
            return self._begin(i)
        if word == "END":
            return self._end(i)
        if word in ("ELSE", "LOOP", "REPEAT", "EXCEPTION"):
            return i + 1
        if word in CONDITION_WORDS and not (word == "FOR" and self._tsql):
            if word in ("FOR", "FORALL"):
                self._declare_names(i + 1)
            return self._condition(i + 1, *CONDITION_WORDS[word])
        if word == "IF" or word == "WHILE":
            return self._if_or_while(i)
        if word == "DECLARE" and not self._tsql:
            self._declaring = True
            self._declare_names(i + 1)
            return i + 1
        if word == "DO" and not self._next_is_string(i):
            return i + 1
        return self._statement(i)

    # -- procedural variables -----------------------------------------------------

    def _declare_names(self, j: int) -> None:
        """Remember ``a, b`` in ``DECLARE a, b INT`` / ``FOR r IN`` as variables."""
        while self._type(j) in NAME_TOKENS:
            self.variables.add(self.tokens[j].text.lower())
            if self._word(j + 1) != ",":
                return
            j += 2

    def _declaration(self, i: int) -> None:
        """``v_total NUMBER := 0;`` in a declaration section declares ``v_total``."""
        if self._type(i) in NAME_TOKENS and self._word(i + 1) not in (".", "(", ":=", "=", ":"):
            self.variables.add(self.tokens[i].text.lower())

    def _parameters(self, j: int) -> set[str]:
        """Names in a routine's ``(p_day DATE, IN p_id INT, ...)`` parameter list."""
        names: set[str] = set()
        if self._type(j) != TokenType.L_PAREN:
            return names
        close = self._matching_paren(j, len(self.tokens))
        expecting = True
        depth = 0
        for k in range(j + 1, close):
            kind = self.tokens[k].token_type
            depth += kind == TokenType.L_PAREN
            depth -= kind == TokenType.R_PAREN
            word = self._word(k)
            if depth == 0 and word == ",":
                expecting = True
            elif expecting and word not in ("IN", "OUT", "INOUT", "VARIADIC"):
                if kind in NAME_TOKENS:
                    names.add(self.tokens[k].text.lower())
                expecting = False
        return names

    # -- helpers on the token stream ----------------------------------------------

    def _word(self, i: int) -> str:
        return keyword(self.tokens[i]) if 0 <= i < len(self.tokens) else ""

    def _type(self, i: int) -> TokenType | None:
        return self.tokens[i].token_type if 0 <= i < len(self.tokens) else None

    def _next_is_string(self, i: int) -> bool:
        return self._type(i + 1) in STRING_TOKENS

    def _is_separator(self, i: int) -> bool:
        token = self.tokens[i]
        if self._tsql:
            return token.token_type == TokenType.COMMAND and token.text.upper() == "GO"
        if self.dialect.name == "oracle" and token.token_type == TokenType.SLASH:
            line_start = self.sql.rfind("\n", 0, token.start) + 1
            line_end = self.sql.find("\n", token.end)
            line = self.sql[line_start : len(self.sql) if line_end < 0 else line_end]
            return line.strip() == "/"
        return False

    def _label_length(self, i: int) -> int:
        words = [self._word(i + k) for k in range(5)]
        if words[:2] == ["<", "<"] and words[3:] == [">", ">"]:
            return 5
        is_name = self._type(i) in NAME_TOKENS
        if is_name and words[1] == ":" and words[2] in ("BEGIN", "LOOP", "WHILE", "FOR", "REPEAT"):
            return 2
        return 0

    def _matching_paren(self, open_index: int, limit: int) -> int:
        depth = 0
        for j in range(open_index, limit):
            kind = self.tokens[j].token_type
            if kind == TokenType.L_PAREN:
                depth += 1
            elif kind == TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    return j
        return limit

    def _emit(self, start: int, stop: int, select_only: bool = False) -> None:
        if stop <= start:
            return
        tokens = tuple(self.tokens[start:stop])
        fragment = Fragment(
            tokens,
            self.sql,
            self.base,
            in_body=self.in_body,
            select_only=select_only,
            variables=frozenset(self.variables),
        )
        self.items.append(fragment)

    # -- control flow ---------------------------------------------------------------

    def _begin(self, i: int) -> int:
        following = self._word(i + 1)
        if following in TRANSACTION_WORDS or self._type(i + 1) in (TokenType.SEMICOLON, None):
            return self._statement_end(i)
        self._blocks += 1
        self._declaring = False
        if following in ("TRY", "CATCH", "ATOMIC"):
            return i + 2
        return i + 1

    def _end(self, i: int) -> int:
        j = i + 1
        if self._word(j) in BLOCK_END_SUFFIXES:
            j += 1
            if self._word(j - 1) in ("TRY", "CATCH"):
                self._blocks = max(self._blocks - 1, 0)
        else:
            self._blocks = max(self._blocks - 1, 0)
        after = self._type(j + 1)
        label_follows = after in (TokenType.SEMICOLON, None) or self._is_separator_at(j + 1)
        if self._type(j) in NAME_TOKENS and label_follows and not self._tsql:
            j += 1
        return j

    def _is_separator_at(self, i: int) -> bool:
        return 0 <= i < len(self.tokens) and self._is_separator(i)

    def _if_or_while(self, i: int) -> int:
        if self._tsql:
            return self._condition(i + 1, frozenset(), True)
        terminators = frozenset({"THEN"}) if self._word(i) == "IF" else frozenset({"DO", "LOOP"})
        return self._condition(i + 1, terminators, True)

    def _condition(self, i: int, terminators: frozenset[str], consume: bool) -> int:
        j = i
        depth = 0
        while j < len(self.tokens):
            kind = self.tokens[j].token_type
            if kind == TokenType.L_PAREN:
                depth += 1
            elif kind == TokenType.R_PAREN:
                depth -= 1
            elif kind == TokenType.SEMICOLON or (
                depth <= 0 and self._condition_ends(i, j, terminators)
            ):
                break
            j += 1
        self._embedded_selects(i, j)
        if consume and self._word(j) in terminators:
            return j + 1
        return j

    def _condition_ends(self, start: int, j: int, terminators: frozenset[str]) -> bool:
        if self.tokens[j].token_type == TokenType.SEMICOLON or self._is_separator(j):
            return True
        word = self._word(j)
        if terminators:
            return word in terminators
        return j > start and (word == "BEGIN" or tsql_starts_statement(word))

    # -- statements -----------------------------------------------------------------

    def _statement(self, i: int) -> int:
        end = self._statement_end(i)
        word = self._word(i)
        if word in DYNAMIC_SQL_WORDS:
            self._dynamic_sql(i, end)
        elif word in NO_LINEAGE_WORDS:
            if word == "LET":
                self._declare_names(i + 1)
            self._embedded_selects(i + 1, end)
        elif word == "CREATE" and self._word(i + 1) in ("TASK", "OR") and self._task_body(i, end):
            pass
        elif word == "DECLARE" and any(self._word(k) == "CURSOR" for k in range(i, end)):
            self._embedded_selects(i, end)
        elif word in STATEMENT_WORDS or self._type(i) == TokenType.L_PAREN:
            self._emit(i, end)
        elif self._in_procedural_code():
            self._declaration(i)
            self._embedded_selects(i, end)
        else:
            self._emit(i, end)
        return end

    def _in_procedural_code(self) -> bool:
        """Declarations and assignments are expected here, not reported as unparsed."""
        return self.in_body or self._blocks > 0 or self._declaring

    def _statement_end(self, i: int) -> int:
        if self._tsql:
            return self._tsql_statement_end(i)
        # A semicolon ends the statement even inside unbalanced parentheses: a missing
        # ')' must not swallow the rest of the file.
        for j in range(i, len(self.tokens)):
            if self.tokens[j].token_type == TokenType.SEMICOLON or self._is_separator(j):
                return j
        return len(self.tokens)

    def _tsql_statement_end(self, i: int) -> int:
        state = TsqlStatementState(self._word(i))
        depth = 0
        cases = int(self._word(i) == "CASE")
        for j in range(i + 1, len(self.tokens)):
            kind = self.tokens[j].token_type
            word = self._word(j)
            if kind == TokenType.L_PAREN:
                depth += 1
            elif kind == TokenType.R_PAREN:
                depth = max(depth - 1, 0)
            elif kind == TokenType.SEMICOLON or self._is_separator(j):
                return j
            elif word == "CASE":
                cases += 1
            elif cases and word == "END":
                cases -= 1
            elif depth == 0 and not cases:
                if state.ends_before(word, self._word(j - 1)):
                    return j
                state.consume(word)
        return len(self.tokens)

    def _task_body(self, i: int, end: int) -> bool:
        """Snowflake ``CREATE TASK ... AS <statement>``: walk the statement."""
        words = [self._word(j) for j in range(i, min(i + 5, end))]
        if "TASK" not in words:
            return False
        for j in range(i, end):
            if self._word(j) == "AS" and self._word(j + 1) in STATEMENT_WORDS:
                self._walk_range(j + 1, end, self.in_body)
                return True
        return True

    def _dynamic_sql(self, i: int, end: int) -> None:
        for j in range(i + 1, min(i + 6, end)):
            if self.tokens[j].token_type in STRING_TOKENS:
                following = self._word(j + 1) if j + 1 < end else ";"
                if following in (";", ")", ",", "USING", "INTO", "LANGUAGE", ""):
                    self._walk_string(j, self.in_body)
                return
            if self._word(j) not in DYNAMIC_SQL_PREFIX:
                return

    def _embedded_selects(self, start: int, stop: int) -> None:
        k = start
        while k < stop:
            if self._starts_query(k):
                if k > start and self.tokens[k - 1].token_type == TokenType.L_PAREN:
                    query_end = self._matching_paren(k - 1, stop)
                else:
                    query_end = self._query_end(k, stop)
                self._emit(k, query_end, select_only=True)
                k = max(query_end, k + 1)
            else:
                k += 1

    def _starts_query(self, k: int) -> bool:
        word = self._word(k)
        if word == "SELECT":
            return True
        return word == "WITH" and self._type(k + 1) in NAME_TOKENS and self._word(k + 2) == "AS"

    def _query_end(self, k: int, stop: int) -> int:
        depth = 0
        for j in range(k, stop):
            kind = self.tokens[j].token_type
            if kind == TokenType.L_PAREN:
                depth += 1
            elif kind == TokenType.R_PAREN:
                depth -= 1
                if depth < 0:
                    return j
        return stop

    # -- nested text ------------------------------------------------------------------

    def _walk_range(self, start: int, stop: int, in_body: bool) -> list[Item]:
        walker = ScriptWalker(
            self.dialect,
            self.tokens[start:stop],
            self.sql,
            self.base,
            in_body=in_body,
            nesting=self.nesting + 1,
            variables=self.variables,
        )
        found = walker.run()
        self.items.extend(found)
        return found

    def _walk_string(self, j: int, in_body: bool) -> list[Item]:
        token = self.tokens[j]
        if self.nesting >= _MAX_NESTING:
            return []
        content = token.text
        raw = self.sql[token.start : token.end + 1]
        offset = raw.find(content) if content else 0
        if offset < 0:
            offset = _opening_quote_length(raw)
        base = self.base + token.start + offset
        try:
            tokens = tokenize(content, self.dialect)
        except TokenError as error:
            message = f"could not tokenise routine body: {str(error).splitlines()[0][:120]}"
            problem = Problem(base, base + max(len(content) - 1, 0), message)
            self.items.append(problem)
            return [problem]
        walker = ScriptWalker(
            self.dialect,
            tokens,
            content,
            base,
            in_body=in_body,
            nesting=self.nesting + 1,
            variables=self.variables,
        )
        found = walker.run()
        self.items.extend(found)
        return found

    # -- stored routines -----------------------------------------------------------------

    def _routine_kind_index(self, i: int) -> int | None:
        first = self._word(i)
        if first in ROUTINE_KINDS and self.dialect.name == "oracle":
            return i if self._type(i + 1) in NAME_TOKENS else None
        if first == "ALTER" and self._word(i + 1) in ROUTINE_KINDS:
            return i + 1 if self._tsql else None
        if first != "CREATE":
            return None
        after_definer = False
        for j in range(i + 1, min(i + 14, len(self.tokens))):
            word = self._word(j)
            if word in ROUTINE_KINDS:
                return j
            if word == "TABLE" and self._word(j + 1) == "FUNCTION":
                continue
            if word in _ROUTINE_PREFIX:
                after_definer = after_definer or word == "DEFINER"
                continue
            if not after_definer:
                return None
        return None

    def _routine(self, i: int, kind_index: int) -> int:
        kind = ROUTINE_KINDS[self._word(kind_index)]
        name, after_name = self._routine_name(kind_index + 1)
        body_items: list[Item] = []
        saved_items, self.items = self.items, body_items
        saved_variables, self.variables = self.variables, self._parameters(after_name)
        try:
            end = self._routine_body(i, after_name, kind)
        finally:
            self.items = saved_items
            self.variables = saved_variables
        last = min(max(end - 1, i), len(self.tokens) - 1)
        routine = Routine(
            kind=kind,
            name=name,
            start=self.base + self.tokens[i].start,
            end=self.base + self.tokens[last].end,
            items=tuple(body_items),
            on_table=self._trigger_table(kind, after_name, end),
        )
        self.items.append(routine)
        return end

    def _trigger_table(self, kind: str, after_name: int, end: int) -> tuple[Token, ...]:
        """Tokens of the table a trigger is defined ``ON``."""
        if kind != "trigger":
            return ()
        for j in range(after_name, min(end, len(self.tokens))):
            if self._word(j) == "ON":
                return tuple(self.tokens[j + 1 : j + 9])
            if self._word(j) in ("AS", "BEGIN"):
                break
        return ()

    def _routine_name(self, j: int) -> tuple[str, int]:
        while self._word(j) in ("BODY", "IF", "NOT", "EXISTS"):
            j += 1
        parts: list[str] = []
        while j < len(self.tokens):
            token = self.tokens[j]
            if token.token_type in STRING_TOKENS or token.token_type == TokenType.L_PAREN:
                break
            quoted = token.token_type == TokenType.IDENTIFIER
            parts.append(token.text if quoted else token.text.lower())
            j += 1
            if self._type(j) != TokenType.DOT:
                break
            j += 1
        return ".".join(parts), j

    def _routine_body(self, i: int, after_name: int, kind: str) -> int:
        if self._tsql:
            return self._tsql_routine_body(after_name)
        # A trigger header may contain AS (REFERENCING NEW AS n): its body starts at
        # DECLARE/BEGIN. Other PL/SQL units declare variables between IS/AS and BEGIN.
        openers = ("DECLARE", "BEGIN") if kind == "trigger" else ("IS", "AS", "DECLARE", "BEGIN")
        if self.dialect.name == "oracle":
            separator = self._next_separator(after_name)
            if separator is not None:
                start = self._first_word_at_depth0(after_name, separator, openers)
                if start is not None and self._word(start) in ("IS", "AS"):
                    start += 1
                self._walk_range(after_name if start is None else start, separator, True)
                return separator + 1
        return self._delimited_routine_body(i, after_name, "IS" in openers)

    def _tsql_routine_body(self, after_name: int) -> int:
        end = self._next_separator(after_name)
        end = len(self.tokens) if end is None else end
        depth = 0
        for j in range(after_name, end):
            kind = self.tokens[j].token_type
            depth += kind == TokenType.L_PAREN
            depth -= kind == TokenType.R_PAREN
            is_as = self._word(j) == "AS" and self._word(j - 1) not in ("EXECUTE", "EXEC")
            if depth == 0 and is_as:
                self._walk_range(j + 1, end, True)
                break
        return end

    def _delimited_routine_body(self, i: int, after_name: int, may_declare: bool) -> int:
        declarations: int | None = None
        depth = 0
        j = after_name
        while j < len(self.tokens):
            kind = self.tokens[j].token_type
            word = self._word(j)
            if kind == TokenType.SEMICOLON and declarations is None:
                break
            if kind == TokenType.L_PAREN:
                depth += 1
            elif kind == TokenType.R_PAREN:
                depth -= 1
            elif depth <= 0:
                if self._is_separator(j):
                    break
                if kind in STRING_TOKENS and self._word(j - 1) == "AS":
                    return self._string_body(i, j)
                if word == "BEGIN":
                    return self._block_body(declarations if declarations is not None else j, j)
                oracle_declarations = self.dialect.name == "oracle" and may_declare
                if word in ("IS", "AS") and oracle_declarations and declarations is None:
                    declarations = j + 1
            j += 1
        self._single_statement_body(after_name, j)
        return j

    def _string_body(self, i: int, j: int) -> int:
        end = self._statement_end(j)
        language = ""
        for k in range(i, end):
            if self._word(k) == "LANGUAGE":
                language = self._word(k + 1) or self.tokens[k + 1].text.upper()
        if language not in NON_SQL_LANGUAGES:
            self._walk_string(j, True)
        return end

    def _block_body(self, body_start: int, begin: int) -> int:
        block_end = self._block_end(begin)
        self._walk_range(body_start, block_end + 1, True)
        k = block_end + 1
        if self._type(k) in NAME_TOKENS and self._type(k + 1) in (TokenType.SEMICOLON, None):
            k += 1
        if self._type(k) == TokenType.SEMICOLON or self._is_separator_at(k):
            k += 1
        return k

    def _single_statement_body(self, after_name: int, stop: int) -> None:
        depth = 0
        for j in range(after_name, stop):
            kind = self.tokens[j].token_type
            depth += kind == TokenType.L_PAREN
            depth -= kind == TokenType.R_PAREN
            word = self._word(j)
            is_row_trigger = word == "EACH" and self._word(j + 1) in ("ROW", "STATEMENT")
            if is_row_trigger:
                self._walk_range(j + 2, stop, True)
                return
            if depth == 0 and word in ("AS", "RETURN"):
                self._walk_range(j + 1, stop, True)
                return

    def _block_end(self, begin: int) -> int:
        depth = 0
        cases = 0
        j = begin
        while j < len(self.tokens):
            word = self._word(j)
            if word == "BEGIN" and not self._is_transaction_begin(j):
                depth += 1
            elif word == "CASE":
                cases += 1
            elif word == "END":
                following = self._word(j + 1)
                if following in ("IF", "LOOP", "WHILE", "FOR", "REPEAT"):
                    j += 1
                elif following == "CASE" or cases > 0:
                    cases = max(cases - 1, 0)
                    j += following == "CASE"
                else:
                    depth -= 1
                    if depth <= 0:
                        return j
            j += 1
        return len(self.tokens) - 1

    def _is_transaction_begin(self, j: int) -> bool:
        following = self._word(j + 1)
        return following in TRANSACTION_WORDS or self._type(j + 1) == TokenType.SEMICOLON

    def _next_separator(self, start: int) -> int | None:
        for j in range(start, len(self.tokens)):
            if self._is_separator(j):
                return j
        return None

    def _first_word_at_depth0(self, start: int, stop: int, words: tuple[str, ...]) -> int | None:
        depth = 0
        for j in range(start, stop):
            kind = self.tokens[j].token_type
            depth += kind == TokenType.L_PAREN
            depth -= kind == TokenType.R_PAREN
            if depth == 0 and self._word(j) in words:
                return j
        return None


def _opening_quote_length(raw: str) -> int:
    for index, char in enumerate(raw):
        if char in "'\"$`":
            return index + 1
    return 0
