"""Semantic chunking: chunks that follow a file's own structure and fit the embedder.

`chunk_file` cuts a file where its meaning breaks: a SQL statement (a CTE or a clause
when the statement is too big), a Python function, method or class header, a dbt
source or model entry, a Markdown section. Every chunk fits the embedding model's token
budget *including* the path embedded in front of it (`f"{path}\\n{text}"`), and every
non-blank line of the file belongs to a chunk: a part too big for the budget is split
at the best boundary it has, down to pieces of a single line.

How a part is split: each file type marks *boundaries* (lines where a part may start),
each with a key ``(depth, rank)``: nesting depth first, then how strong a break it is
(statement, CTE, UNION, clause, JOIN, condition). A part that does not fit is cut at
its interior boundaries of the smallest key, the pieces are merged back greedily up to
the budget, and a piece still too big is split the same way with the next key. With
no boundary left, lines are packed greedily (never starting a piece inside a string or
comment when that can be avoided), and a single line too long is cut into pieces.

Pure (no I/O) and deterministic: the same input always gives the same chunks.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from itertools import accumulate, pairwise
from pathlib import PurePosixPath

from sqlglot.dialects.dialect import Dialect
from sqlglot.tokenizer_core import Token, TokenType
from sqlglot.tokens import Tokenizer

from domain.chunking import Chunk

__all__ = [
    "CHUNK_TYPES",
    "SemanticChunk",
    "TokenCounter",
    "chunk_file",
    "estimate_tokens",
]

TokenCounter = Callable[[str], int]
"""Tokens of a text as the embedding model counts them, special tokens included."""

CHUNK_TYPES: tuple[str, ...] = (
    "sql_view",
    "sql_table",
    "sql_procedure",
    "sql_function",
    "sql_statement",
    "sql_cte",
    "dbt_model",
    "python_module",
    "python_class",
    "python_function",
    "yaml_source",
    "yaml_model",
    "yaml",
    "markdown_section",
    "text",
)

_MAX_DEPTH = 16  # deeper nesting splits like this depth: bounds the recursion


@dataclass(frozen=True, slots=True)
class SemanticChunk(Chunk):
    """A chunk with what it is about.

    ``name`` is the statement's target, the function's qualified name, the dbt entry's
    name or the heading; ``parent`` the enclosing class, statement, model or heading;
    ``tables`` and ``columns`` the lower-cased names the chunk's text refers to.
    ``text`` may start with a context line (the ``def`` line, the heading path, the
    statement's head) that lies outside ``line_start..line_end``.
    """

    name: str | None = None
    parent: str | None = None
    tables: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        data = Chunk.to_dict(self)
        data["name"] = self.name
        data["parent"] = self.parent
        data["tables"] = list(self.tables)
        data["columns"] = list(self.columns)
        return data


def chunk_file(
    path: str,
    content: str,
    *,
    max_tokens: int = 256,
    count_tokens: TokenCounter | None = None,
    dialect: str | None = None,
) -> list[SemanticChunk]:
    """Cut `content` into chunks whose embedded text (path, newline, text) fits `max_tokens`.

    Args:
        path: the file's path; it picks the chunker and is counted in the budget.
        content: the file's text.
        max_tokens: the embedding model's limit, special tokens included.
        count_tokens: the model tokenizer's count; `estimate_tokens` when None.
        dialect: SQL dialect for the tokenizer (sqlglot names; unknown ones fall back).

    Raises:
        ValueError: when the path alone leaves no room for any text.
    """
    budget = _Budget(path, max_tokens, count_tokens)
    text = content.replace("\r\n", "\n")
    layout = _layout_for(path, text, dialect)
    pieces = _Packer(layout, budget, text).run()
    return [_chunk(index, piece, layout) for index, piece in enumerate(pieces)]


# -- the token budget -------------------------------------------------------------------------

_ESTIMATE_PIECES = re.compile(r"[A-Za-z0-9]+|\S")


def estimate_tokens(text: str) -> int:
    """A cautious stand-in for a WordPiece count, special tokens included.

    Every symbol and non-ASCII character counts one token, a run of letters one per
    three letters, a run with digits one per two characters. On code and prose it
    over-counts all-MiniLM-L6-v2 by about 30 %; random-looking identifiers (hashes)
    can be under-counted, which is why the adapter should pass the real count.
    """
    total = 2
    for match in _ESTIMATE_PIECES.finditer(text):
        size = match.end() - match.start()
        if size == 1:
            total += 1
        elif match.group().isalpha():
            total += -(-size // 3)
        else:
            total += -(-size // 2)
    return total


class _Budget:
    """Counts what a chunk costs once embedded as ``f"{path}\\n{text}"``."""

    def __init__(self, path: str, max_tokens: int, count: TokenCounter | None) -> None:
        self.path = path
        self.max_tokens = max_tokens
        self.count: TokenCounter = count if count is not None else estimate_tokens
        self._empty = self.count("")
        self.fixed = self.count(f"{path}\n")
        if not self.fits("x"):
            raise ValueError(f"max_tokens={max_tokens} leaves no room for text after {path!r}")

    @property
    def room(self) -> int:
        return self.max_tokens - self.fixed

    def cost(self, text: str) -> int:
        """Tokens `text` adds to an embedded text (WordPiece counts add up across lines)."""
        if not text.strip():
            return 0
        return max(self.count(text) - self._empty, 0)

    def fits(self, text: str) -> bool:
        """The exact check: the embedded text fits the model."""
        return self.count(f"{self.path}\n{text}") <= self.max_tokens


# -- layouts: what a file chunker hands to the packer -----------------------------------------


@dataclass(frozen=True, slots=True)
class _Label:
    chunk_type: str
    name: str | None = None
    parent: str | None = None


Context = tuple[tuple[int, str], ...]
"""(anchor line, text) pairs: the text is put in front of parts starting after the anchor."""


@dataclass(frozen=True, slots=True)
class _Unit:
    """Lines ``start`` (0-based) to ``end`` (exclusive) that make one chunk when they fit."""

    start: int
    end: int
    label: _Label
    context: Context = ()
    mergeable: bool = False


@dataclass(frozen=True, slots=True)
class _Entry:
    start: int
    label: _Label
    context: Context = ()
    mergeable: bool = False


@dataclass(frozen=True, slots=True)
class _Piece:
    """A chunk to be: lines ``first..last`` (0-based, inclusive), characters ``start:stop``."""

    first: int
    last: int
    start: int
    stop: int
    text: str
    label: _Label


Meta = tuple[tuple[str, ...], tuple[str, ...]]


@dataclass
class _Layout:
    lines: list[str]
    offsets: list[int]
    units: list[_Unit]
    boundaries: dict[int, tuple[int, int]] = field(default_factory=dict)
    labels: dict[int, _Label] = field(default_factory=dict)
    unsafe: set[int] = field(default_factory=set)
    context_of: Callable[[_Unit, int], tuple[str, ...]] | None = None
    merge: Callable[[_Label, _Label], _Label | None] | None = None
    meta: Callable[[_Piece], Meta] | None = None

    def add_boundary(self, line: int, key: tuple[int, int]) -> None:
        old = self.boundaries.get(line)
        if old is None or key < old:
            self.boundaries[line] = key

    def context(self, unit: _Unit, line: int) -> tuple[str, ...]:
        if self.context_of is not None:
            return self.context_of(unit, line)
        return tuple(text for anchor, text in unit.context if anchor < line)


def _split_lines(text: str) -> tuple[list[str], list[int]]:
    lines = text.split("\n")
    offsets = [0, *accumulate(len(line) + 1 for line in lines[:-1])]
    return lines, offsets


def _partition(entries: Sequence[_Entry], total: int) -> list[_Unit]:
    """Units from their starts: each runs to the next start; the first starts at line 0."""
    kept: list[_Entry] = []
    for entry in entries:
        if not kept or entry.start > kept[-1].start:
            kept.append(entry)
    units = []
    for k, entry in enumerate(kept):
        start = 0 if k == 0 else entry.start
        end = kept[k + 1].start if k + 1 < len(kept) else total
        units.append(_Unit(start, end, entry.label, entry.context, entry.mergeable))
    return units


def _merge_names(a: _Label, b: _Label, chunk_type: str) -> _Label:
    names = {name for name in (a.name, b.name) if name is not None}
    return _Label(chunk_type, names.pop() if len(names) == 1 else None)


def _lift(lines: Sequence[str], line: int, floor: int, unsafe: set[int]) -> int:
    """Move a boundary up over the comment lines right above it (down to `floor` + 1)."""
    while line - 1 > floor and (lines[line - 1].strip() or line in unsafe):
        line -= 1
    return line


def _layout_for(path: str, text: str, dialect: str | None) -> _Layout:
    lines, offsets = _split_lines(text)
    suffix = PurePosixPath(path).suffix.lower()
    layout: _Layout | None = None
    if suffix == ".sql":
        layout = _sql_layout(path, text, lines, offsets, dialect)
    elif suffix in (".py", ".pyi"):
        layout = _python_layout(text, lines, offsets)
    elif suffix in (".yml", ".yaml"):
        layout = _yaml_layout(lines, offsets)
    elif suffix in (".md", ".markdown"):
        layout = _markdown_layout(lines, offsets)
    return layout if layout is not None else _generic_layout(lines, offsets)


def _generic_layout(lines: list[str], offsets: list[int]) -> _Layout:
    """The whole file as one part, split at paragraphs, then lines."""
    layout = _Layout(lines, offsets, [_Unit(0, len(lines), _Label("text"))])
    for i in range(1, len(lines)):
        if lines[i].strip() and not lines[i - 1].strip():
            layout.add_boundary(i, (0, 0))
    return layout


def _chunk(index: int, piece: _Piece, layout: _Layout) -> SemanticChunk:
    tables, columns = layout.meta(piece) if layout.meta is not None else ((), ())
    return SemanticChunk(
        index,
        piece.text,
        piece.first + 1,
        piece.last + 1,
        piece.label.chunk_type,
        name=piece.label.name,
        parent=piece.label.parent,
        tables=tables,
        columns=columns,
    )


# -- the packer: units -> pieces that fit -----------------------------------------------------


class _Packer:
    def __init__(self, layout: _Layout, budget: _Budget, content: str) -> None:
        self.layout = layout
        self.lines = layout.lines
        self.budget = budget
        self.content = content
        self.prefix = list(accumulate((budget.cost(line) for line in layout.lines), initial=0))
        self.cuts = sorted(line for line in layout.boundaries if line not in layout.unsafe)
        self.label_lines = sorted(layout.labels)
        self._contexts: dict[tuple[str, ...], tuple[str, int]] = {}

    def run(self) -> list[_Piece]:
        pieces: list[_Piece] = []
        for unit in self._merged(self.layout.units):
            for piece in self._split(unit, unit.start, unit.end):
                pieces.extend(self._verified(piece))
        return pieces

    # -- sizes ---------------------------------------------------------------------------

    def _context(self, unit: _Unit, line: int) -> tuple[str, int]:
        parts = self.layout.context(unit, line)
        found = self._contexts.get(parts)
        if found is None:
            found = self._bounded(parts)
            self._contexts[parts] = found
        return found

    def _bounded(self, parts: tuple[str, ...]) -> tuple[str, int]:
        """The context, or its last part's first line, or nothing: at most a third of the room."""
        limit = self.budget.room // 3
        for text in ("\n".join(parts), parts[-1].split("\n")[0].strip()[:120] if parts else ""):
            cost = self.budget.cost(text)
            if cost <= limit:
                return text, cost
        return "", 0

    def _fits(self, unit: _Unit, a: int, b: int) -> bool:
        cost = self._context(unit, a)[1] + self.prefix[b] - self.prefix[a]
        return self.budget.fixed + cost <= self.budget.max_tokens

    # -- merging small units ------------------------------------------------------------------

    def _merged(self, units: list[_Unit]) -> list[_Unit]:
        merged: list[_Unit] = []
        for unit in units:
            joined = self._join(merged[-1], unit) if merged else None
            if joined is not None:
                merged[-1] = joined
            else:
                merged.append(unit)
        return merged

    def _join(self, a: _Unit, b: _Unit) -> _Unit | None:
        if not (a.mergeable and b.mergeable) or self.layout.merge is None:
            return None
        label = self.layout.merge(a.label, b.label)
        if label is None:
            return None
        joined = replace(a, end=b.end, label=label)
        return joined if self._fits(joined, joined.start, joined.end) else None

    # -- splitting ------------------------------------------------------------------------------

    def _split(self, unit: _Unit, a: int, b: int, lead: int | None = None) -> list[_Piece]:
        """Pieces of lines `lead`..`b`: cut at the strongest boundaries inside (a, b).

        Lines `lead`..`a` are a small header (a `sources:` key, a `def` line) glued to
        the first piece.
        """
        lead = a if lead is None else lead
        if self._fits(unit, lead, b):
            return self._range(unit, lead, b)
        cuts = self._best_cuts(a, b)
        if not cuts:
            return self._pack_lines(unit, lead, b)
        return self._pack_segments(unit, list(pairwise([lead, *cuts, b])))

    def _best_cuts(self, a: int, b: int) -> list[int]:
        inner = self.cuts[bisect_right(self.cuts, a) : bisect_left(self.cuts, b)]
        if not inner:
            return []
        best = min(self.layout.boundaries[line] for line in inner)
        return [line for line in inner if self.layout.boundaries[line] == best]

    def _pack_segments(self, unit: _Unit, segments: list[tuple[int, int]]) -> list[_Piece]:
        """Merge consecutive segments up to the budget; split a segment too big alone."""
        pieces: list[_Piece] = []
        group: tuple[int, int] | None = None
        for a, b in segments:
            if group is not None and self._fits(unit, group[0], b):
                group = (group[0], b)
                continue
            fits = self._fits(unit, a, b)
            if group is not None and not fits and self._small(*group):
                pieces.extend(self._split(unit, a, b, lead=group[0]))
                group = None
                continue
            if group is not None:
                pieces.extend(self._range(unit, *group))
            group = (a, b) if fits else None
            if not fits:
                pieces.extend(self._split(unit, a, b))
        if group is not None:
            pieces.extend(self._range(unit, *group))
        return pieces

    def _small(self, a: int, b: int) -> bool:
        return self.prefix[b] - self.prefix[a] <= self.budget.room // 4

    def _pack_lines(self, unit: _Unit, a: int, b: int) -> list[_Piece]:
        pieces: list[_Piece] = []
        i = a
        while i < b:
            end = self._reach(unit, i, b)
            if end == i:
                pieces.extend(self._oversized_line(unit, i))
                i += 1
                continue
            if end < b:
                end = self._safe_end(i, end)
            pieces.extend(self._range(unit, i, end))
            i = end
        return pieces

    def _reach(self, unit: _Unit, i: int, b: int) -> int:
        """The largest `end` such that lines i..end-1 fit (i when not even line i fits)."""
        lo, hi = i, b
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._fits(unit, i, mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _safe_end(self, i: int, end: int) -> int:
        for cut in range(end, i, -1):
            if cut not in self.layout.unsafe:
                return cut
        return end

    def _oversized_line(self, unit: _Unit, i: int) -> list[_Piece]:
        label = self._label_at(unit, i)
        if self.budget.fixed + self.prefix[i + 1] - self.prefix[i] <= self.budget.max_tokens:
            return self._pieces_of(i, i + 1, "", label)
        start = self.layout.offsets[i]
        return self._char_pieces(label, i, start, start + len(self.lines[i]))

    # -- making pieces ------------------------------------------------------------------------

    def _range(self, unit: _Unit, a: int, b: int) -> list[_Piece]:
        return self._pieces_of(a, b, self._context(unit, a)[0], self._label_at(unit, a))

    def _pieces_of(self, a: int, b: int, context: str, label: _Label) -> list[_Piece]:
        while a < b and not self.lines[a].strip():
            a += 1
        while b > a and not self.lines[b - 1].strip():
            b -= 1
        if a >= b:
            return []
        start = self.layout.offsets[a]
        stop = self.layout.offsets[b - 1] + len(self.lines[b - 1])
        body = self.content[start:stop]
        text = f"{context}\n{body}" if context else body
        return [_Piece(a, b - 1, start, stop, text, label)]

    def _label_at(self, unit: _Unit, line: int) -> _Label:
        k = bisect_right(self.label_lines, line) - 1
        if k >= 0 and self.label_lines[k] > unit.start:
            return self.layout.labels[self.label_lines[k]]
        return unit.label

    def _char_pieces(self, label: _Label, line: int, start: int, stop: int) -> list[_Piece]:
        """Cut one line into pieces that fit, preferring to cut after whitespace."""
        pieces: list[_Piece] = []
        position = start
        while position < stop:
            end = self._soft_end(position, self._longest_fit(position, stop), stop)
            text = self.content[position:end]
            if text.strip():
                pieces.append(_Piece(line, line, position, end, text, label))
            position = end
        return pieces

    def _longest_fit(self, start: int, stop: int) -> int:
        fits = self.budget.fits
        lo, probe = start, start + max(16, 2 * self.budget.room)
        while probe < stop and fits(self.content[start:probe]):
            lo, probe = probe, start + 2 * (probe - start)
        hi = min(probe, stop)
        if hi == stop and fits(self.content[start:stop]):
            return stop
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fits(self.content[start:mid]):
                lo = mid
            else:
                hi = mid
        return max(lo, start + 1)

    def _soft_end(self, start: int, end: int, stop: int) -> int:
        if end >= stop:
            return stop
        cut = max(self.content.rfind(" ", start, end), self.content.rfind("\t", start, end))
        return cut + 1 if cut > start + (end - start) // 2 else end

    # -- the exact check ------------------------------------------------------------------------

    def _verified(self, piece: _Piece) -> list[_Piece]:
        if self.budget.fits(piece.text):
            return [piece]
        if piece.first == piece.last:
            return self._char_pieces(piece.label, piece.first, piece.start, piece.stop)
        return self._refit_lines(piece)

    def _refit_lines(self, piece: _Piece) -> list[_Piece]:
        """For a counter that does not add up over lines: grow pieces line by line."""
        pieces: list[_Piece] = []
        a = piece.first
        while a <= piece.last:
            b = a + 1
            while b <= piece.last and self.budget.fits(self._body(a, b + 1)):
                b += 1
            pieces.extend(
                _flatten(self._verified(p) for p in self._pieces_of(a, b, "", piece.label))
            )
            a = b
        return pieces

    def _body(self, a: int, b: int) -> str:
        return "\n".join(self.lines[a:b])


def _flatten(groups: Iterator[list[_Piece]]) -> list[_Piece]:
    return [piece for group in groups for piece in group]


# -- SQL: lexing ------------------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WORD, _KEYWORD, _QUOTED, _STRING, _NUMBER, _SYMBOL = range(6)
_NAMEISH = frozenset({_WORD, _KEYWORD, _QUOTED})

_DIALECT_ALIASES = {
    "ansi": "",
    "sql": "",
    "sparksql": "spark",
    "postgresql": "postgres",
    "mssql": "tsql",
    "sqlserver": "tsql",
}
_BACKSLASH_DIALECTS = frozenset({"mysql", "bigquery", "spark", "databricks", "hive"})
_STRING_TYPES = frozenset(
    {
        TokenType.STRING,
        TokenType.RAW_STRING,
        TokenType.HEREDOC_STRING,
        TokenType.NATIONAL_STRING,
        TokenType.BYTE_STRING,
        TokenType.UNICODE_STRING,
        TokenType.BIT_STRING,
        TokenType.HEX_STRING,
    }
)
_PREFIX_TYPES = frozenset({TokenType.PARAMETER, TokenType.HASH})
_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_NOT_NEWLINE = re.compile(r"[^\n]")
_DOLLAR_QUOTE = re.compile(r"\$(?:[^\W\d]\w*)?\$")
_DELIMITER_LINE = re.compile(
    r"^[ \t]*DELIMITER[ \t]+([^\s'\"]\S*)[ \t]*$", re.IGNORECASE | re.MULTILINE
)


@dataclass(slots=True)
class _Lexeme:
    kind: int
    word: str  # upper-cased text of a bare word or symbol; "" for strings, numbers, quoted names
    name: str  # lower-cased identifier (bare or quoted); "" otherwise
    start: int  # offset of the first character
    end: int  # offset of the last character
    line: int = 0
    end_line: int = 0
    first: bool = False  # first lexeme on its line
    inner: list[_Lexeme] | None = None  # the lexemes of a $$-quoted body

    @property
    def head(self) -> str:
        return self.word.split(" ", 1)[0]


@dataclass(frozen=True)
class _SqlDialect:
    name: str
    glot: Dialect
    tokenizer: type[Tokenizer]
    scanner: re.Pattern[str]
    keywords: frozenset[str]


@cache
def _sql_dialect(requested: str | None) -> _SqlDialect:
    name = (requested or "").strip().lower()
    name = _DIALECT_ALIASES.get(name, name)
    try:
        glot = Dialect.get_or_raise(name or None)
    except ValueError:
        name, glot = "", Dialect.get_or_raise(None)
    base = glot.tokenizer_class
    # Without this, sqlglot swallows the rest of a statement after command words (EXEC...).
    tokenizer = type(f"Chunk{base.__name__}", (base,), {"COMMANDS": set()})
    keywords = frozenset(key for key in base.KEYWORDS if key.replace("_", "").isalpha())
    return _SqlDialect(name, glot, tokenizer, _scanner(name), keywords)


def _scanner(dialect: str) -> re.Pattern[str]:
    """The fallback lexer: comments, strings, quoted names, words, numbers, symbols."""
    if dialect in _BACKSLASH_DIALECTS:
        single = r"'(?:[^'\\]|\\.|'')*(?:'|\Z)"
    else:
        single = r"'(?:[^']|'')*(?:'|\Z)"
    comment = r"--[^\n]*|/\*.*?(?:\*/|\Z)" + (r"|\#[^\n]*" if dialect == "mysql" else "")
    quoted = r'"(?:[^"]|"")*(?:"|\Z)|`[^`]*(?:`|\Z)' + (
        r"|\[[^\]\n]*\]" if dialect == "tsql" else ""
    )
    parts = [
        r"(?P<space>\s+)",
        f"(?P<comment>{comment})",
        r"(?P<dollar>\$(?P<tag>[^\W\d]\w*)?\$.*?(?:\$(?P=tag)\$|\Z))",
        f"(?P<string>{single})",
        f"(?P<quoted>{quoted})",
        r"(?P<word>[@#]*[^\W\d][\w$]*|[@#]+\w+)",
        r"(?P<number>\d[\w.]*)",
        r"(?P<symbol>.)",
    ]
    return re.compile("|".join(parts), re.DOTALL)


@dataclass
class _Lexed:
    lexemes: list[_Lexeme]
    spans: list[tuple[int, int]]  # comments and strings, [start, end]: may hold line starts


def _lex(text: str, base: int, dialect: _SqlDialect, nested: bool = False) -> _Lexed:
    """Lexemes of `text` (offsets shifted by `base`): sqlglot's tokenizer, else our scanner."""
    try:
        tokens = dialect.tokenizer(dialect=dialect.glot).tokenize(text)
    except Exception:  # TokenError mostly; any tokenizer failure has the scanner as fallback
        return _scan(text, base, dialect, nested)
    lexed = _Lexed(_from_tokens(tokens, base), _gap_comments(text, tokens, base, dialect))
    if not nested:
        _lex_bodies(text, base, dialect, lexed)
    return lexed


def _from_tokens(tokens: list[Token], base: int) -> list[_Lexeme]:
    lexemes: list[_Lexeme] = []
    skip = False
    for k, token in enumerate(tokens):
        if skip:
            skip = False
            continue
        following = tokens[k + 1] if k + 1 < len(tokens) else None
        if token.token_type in _PREFIX_TYPES and _glued_name(token, following):
            assert following is not None
            text = token.text + following.text  # @variable, #temp_table
            start, end = base + token.start, base + following.end
            lexemes.append(_Lexeme(_WORD, text.upper(), text.lower(), start, end))
            skip = True
            continue
        lexemes.append(_lexeme_of(token, base))
    return lexemes


def _glued_name(token: Token, following: Token | None) -> bool:
    if following is None or following.start != token.end + 1:
        return False
    return following.text.replace("_", "").isalnum()


def _lexeme_of(token: Token, base: int) -> _Lexeme:
    kind = token.token_type
    start, end = base + token.start, base + token.end
    if kind in _STRING_TYPES:
        return _Lexeme(_STRING, "", "", start, end)
    if kind == TokenType.IDENTIFIER:
        return _Lexeme(_QUOTED, "", token.text.lower(), start, end)
    if kind == TokenType.NUMBER:
        return _Lexeme(_NUMBER, "", "", start, end)
    text = " ".join(token.text.split())
    if kind == TokenType.VAR:
        return _Lexeme(_WORD, text.upper(), text.lower(), start, end)
    if text[:1].isalpha() or text[:1] == "_":
        return _Lexeme(_KEYWORD, text.upper(), text.lower(), start, end)
    return _Lexeme(_SYMBOL, text, "", start, end)


_GAP_COMMENTS = re.compile(r"--[^\n]*|#[^\n]*|/\*.*?(?:\*/|\Z)", re.DOTALL)


def _gap_comments(
    text: str, tokens: list[Token], base: int, dialect: _SqlDialect
) -> list[tuple[int, int]]:
    """Block comments between tokens (sqlglot keeps comments out of the token stream)."""
    spans = []
    previous_end = -1
    for token in [*tokens, None]:
        gap_end = token.start if token is not None else len(text)
        gap = text[previous_end + 1 : gap_end]
        if "/*" in gap:
            for match in _GAP_COMMENTS.finditer(gap):
                if match.group().startswith("/*"):
                    offset = base + previous_end + 1
                    spans.append((offset + match.start(), offset + match.end() - 1))
        if token is not None:
            previous_end = token.end
    return spans


def _lex_bodies(text: str, base: int, dialect: _SqlDialect, lexed: _Lexed) -> None:
    """Lex the bodies of multi-line $$-quoted strings (routine bodies) too."""
    for lexeme in lexed.lexemes:
        raw = text[lexeme.start - base : lexeme.end - base + 1]
        if lexeme.kind != _STRING or not raw.startswith("$") or "\n" not in raw:
            continue
        tag = raw[: raw.find("$", 1) + 1]
        if len(raw) < 2 * len(tag) or not raw.endswith(tag):
            continue
        body = raw[len(tag) : len(raw) - len(tag)]
        inner = _lex(body, lexeme.start + len(tag), dialect, nested=True)
        lexeme.inner = inner.lexemes
        lexed.spans.extend(inner.spans)


def _scan(text: str, base: int, dialect: _SqlDialect, nested: bool) -> _Lexed:
    lexed = _Lexed([], [])
    for match in dialect.scanner.finditer(text):
        group = match.lastgroup
        if group == "space":
            continue
        start, end = base + match.start(), base + match.end() - 1
        if group == "comment":
            lexed.spans.append((start, end))
        else:
            lexed.lexemes.append(_scanned(match.group(), group, start, end, dialect))
    if not nested:
        _lex_bodies(text, base, dialect, lexed)
    return lexed


def _scanned(text: str, group: str | None, start: int, end: int, dialect: _SqlDialect) -> _Lexeme:
    if group in ("dollar", "string"):
        return _Lexeme(_STRING, "", "", start, end)
    if group == "quoted":
        return _Lexeme(_QUOTED, "", text[1:-1].lower(), start, end)
    if group == "number":
        return _Lexeme(_NUMBER, "", "", start, end)
    if group == "word":
        kind = _KEYWORD if text.upper() in dialect.keywords else _WORD
        return _Lexeme(kind, text.upper(), text.lower(), start, end)
    return _Lexeme(_SYMBOL, text, "", start, end)


def _locate(lexemes: list[_Lexeme], offsets: list[int]) -> None:
    """Set line numbers (0-based) and the first-on-line flag."""
    previous_line = -1
    for lexeme in lexemes:
        lexeme.line = bisect_right(offsets, lexeme.start) - 1
        lexeme.end_line = bisect_right(offsets, lexeme.end) - 1
        lexeme.first = lexeme.line > previous_line
        previous_line = lexeme.end_line
        if lexeme.inner:
            _locate(lexeme.inner, offsets)


def _unsafe_lines(spans: Sequence[tuple[int, int]], offsets: list[int]) -> set[int]:
    """Lines that start inside a string, comment or Jinja tag."""
    unsafe: set[int] = set()
    for start, end in spans:
        first = bisect_right(offsets, start) - 1
        last = bisect_right(offsets, end) - 1
        unsafe.update(range(first + 1, last + 1))
    return unsafe


def _blank_jinja(text: str) -> tuple[str, list[tuple[int, int]]]:
    """Jinja tags neutralised, offsets and line breaks kept: `;` inside tags are gone.

    An expression (`{{ ref('x') }}`) becomes underscores, a name to the tokenizer (so
    `FROM {{ ref('x') }} o` keeps `o` an alias); statements and comments become spaces.
    """
    spans: list[tuple[int, int]] = []

    def blank(match: re.Match[str]) -> str:
        spans.append((match.start(), match.end() - 1))
        fill = "_" if match.group().startswith("{{") else " "
        return _NOT_NEWLINE.sub(fill, match.group())

    return _JINJA.sub(blank, text), spans


def _neutralise_delimiters(text: str) -> str:
    """MySQL client `DELIMITER //` sections as plain `;`-terminated text, offsets kept."""
    if "delimiter" not in text.lower():
        return text
    parts: list[str] = []
    position, delimiter = 0, ";"
    for match in _DELIMITER_LINE.finditer(text):
        parts.append(_replace_delimiter(text[position : match.start()], delimiter))
        parts.append(" " * (match.end() - match.start()))
        delimiter, position = match.group(1), match.end()
    parts.append(_replace_delimiter(text[position:], delimiter))
    return "".join(parts)


def _replace_delimiter(text: str, delimiter: str) -> str:
    if delimiter == ";":
        return text
    pattern = re.compile(re.escape(delimiter) + r"(?=[ \t]*(?:\n|$))")
    return pattern.sub(lambda m: ";" + " " * (len(m.group()) - 1), text)


# -- SQL: statements --------------------------------------------------------------------------

_ROUTINE_WORDS = frozenset({"PROCEDURE", "PROC", "FUNCTION", "TRIGGER", "PACKAGE"})
_NOT_ROUTINE = frozenset({"TABLE", "VIEW", "INDEX", "SCHEMA", "DATABASE", "SEQUENCE", "AS", "("})
_TRANSACTION_WORDS = _words(
    "TRAN TRANSACTION WORK DISTRIBUTED ISOLATION DEFERRED IMMEDIATE EXCLUSIVE READ ;"
)
_END_SUFFIXES = frozenset({"IF", "LOOP", "WHILE", "FOR", "REPEAT"})
_TSQL_STARTS = _words(
    "CREATE ALTER DROP INSERT UPDATE DELETE MERGE TRUNCATE DECLARE EXEC EXECUTE PRINT IF "
    "WHILE USE GRANT REVOKE BEGIN RAISERROR THROW RETURN WITH"
)
_DECLARE_BLOCK_DIALECTS = frozenset({"oracle", "snowflake"})
_FOREIGN_LANGUAGES = _words(
    "javascript js python java scala plpythonu plpython3u plv8 plperl plperlu pltcl r c"
)


class _Statements:
    """Splits a script's lexemes into statements: inclusive index ranges.

    A statement ends at a top-level `;`, at a `GO` or `/` line, or, in T-SQL, before a
    line starting a new statement. Routine definitions and `BEGIN ... END` blocks
    keep their inner `;`: they end at their closing `END` (or at the batch separator).
    """

    def __init__(self, lexemes: list[_Lexeme], dialect: str) -> None:
        self.lx = lexemes
        self.n = len(lexemes)
        self.tsql = dialect == "tsql"
        self.oracle = dialect == "oracle"
        self.dialect = dialect
        self.separators = [self._is_separator(k) for k in range(self.n)]
        self.next_separator = self._next_separators()

    def split(self) -> list[tuple[int, int]]:
        ranges: list[tuple[int, int]] = []
        i = 0
        while i < self.n:
            if ranges and (self.lx[i].word == ";" or self.separators[i]):
                ranges[-1] = (ranges[-1][0], i)
                i += 1
                continue
            end = max(self._end(i), i)
            ranges.append((i, end))
            i = end + 1
        return ranges

    def _word(self, k: int) -> str:
        return self.lx[k].word if 0 <= k < self.n else ""

    def _is_separator(self, k: int) -> bool:
        lexeme = self.lx[k]
        if lexeme.word not in ("GO", "/") or (
            lexeme.word == "GO" and self.dialect not in ("", "tsql")
        ):
            return False
        alone_before = k == 0 or self.lx[k - 1].end_line < lexeme.line
        alone_after = k + 1 >= self.n or self.lx[k + 1].line > lexeme.end_line
        return alone_before and alone_after

    def _next_separators(self) -> list[int | None]:
        found: list[int | None] = [None] * self.n
        upcoming: int | None = None
        for k in range(self.n - 1, -1, -1):
            if self.separators[k]:
                upcoming = k
            found[k] = upcoming
        return found

    def _end(self, i: int) -> int:
        word = self.lx[i].word
        if self.is_routine(i):
            return self._routine_end(i)
        if word == "BEGIN" and not self._transaction_begin(i):
            return self._block_end(i, absorbing=False, routine=False)
        if word == "DECLARE" and self.dialect in _DECLARE_BLOCK_DIALECTS:
            return self._block_end(i, absorbing=True, routine=False)
        return self._plain_end(i)

    def is_routine(self, i: int) -> bool:
        first = self.lx[i].word
        if first != "CREATE" and not (first == "ALTER" and self.tsql):
            return False
        for k in range(i + 1, min(i + 14, self.n)):
            word = self.lx[k].head
            if word in _ROUTINE_WORDS or (word == "TYPE" and self._word(k + 1) == "BODY"):
                return True
            if word == "TABLE" and self._word(k + 1) == "FUNCTION":
                continue
            if word in _NOT_ROUTINE:
                return False
        return False

    def _routine_end(self, i: int) -> int:
        separator = self.next_separator[i]
        if separator is not None and (self.tsql or self.lx[separator].word == "/"):
            return separator
        if self.tsql:
            return self.n - 1
        return self._block_end(i, absorbing=False, routine=True)

    def _transaction_begin(self, k: int) -> bool:
        return k + 1 >= self.n or self.lx[k + 1].head in _TRANSACTION_WORDS

    def _block_end(self, i: int, *, absorbing: bool, routine: bool) -> int:
        depth = blocks = cases = 0
        for j in range(i, self.n):
            word = self.lx[j].word
            if self.separators[j]:
                return j
            if word in ("(", ")"):
                depth = max(depth + (1 if word == "(" else -1), 0)
            elif depth or not word:
                continue
            elif word == ";" and not absorbing:
                return j
            elif word == "BEGIN" and not self._transaction_begin(j):
                blocks, absorbing = blocks + 1, True
            elif word == "CASE":
                cases += 1
            elif word == "END" and self._word(j + 1) not in _END_SUFFIXES:
                if cases:
                    cases -= 1
                    continue
                blocks -= 1
                if blocks <= 0 and absorbing:
                    return self._after_end(j)
            elif word in ("IS", "AS") and routine and self.oracle:
                absorbing = True
        return self.n - 1

    def _after_end(self, j: int) -> int:
        """`END`, then its label (`END name`, `END TRY`), `;` and a separator line."""
        k = j
        following = self.lx[k + 1] if k + 1 < self.n else None
        if following and following.line == self.lx[j].line and following.kind in _NAMEISH:
            k += 1
        if self._word(k + 1) == ";":
            k += 1
        if k + 1 < self.n and self.separators[k + 1]:
            k += 1
        return k

    def _plain_end(self, i: int) -> int:
        depth = 0
        for j in range(i, self.n):
            word = self.lx[j].word
            if self.separators[j]:
                return j
            if word == "(":
                depth += 1
            elif word == ")":
                depth = max(depth - 1, 0)
            elif depth == 0 and word == ";":
                return j
            elif depth == 0 and self.tsql and j > i and self._tsql_starts(j):
                return j - 1
        return self.n - 1

    def _tsql_starts(self, j: int) -> bool:
        lexeme = self.lx[j]
        if not lexeme.first or lexeme.head not in _TSQL_STARTS:
            return False
        if self._word(j - 1) in ("THEN", "ELSE", "(", ",", "AS"):
            return False
        if lexeme.head == "WITH":
            return self.lx[j + 1].kind in _NAMEISH if j + 1 < self.n else False
        return True


# -- SQL: what a statement is -----------------------------------------------------------------

_OBJECT_TYPES = {
    "TABLE": "sql_table",
    "VIEW": "sql_view",
    "PROCEDURE": "sql_procedure",
    "PROC": "sql_procedure",
    "FUNCTION": "sql_function",
    "TRIGGER": "sql_procedure",
    "PACKAGE": "sql_procedure",
}
_OTHER_OBJECTS = _words(
    "INDEX SCHEMA DATABASE SEQUENCE TYPE STAGE STREAM TASK PIPE MACRO EXTENSION ROLE USER"
)
_TARGET_SKIPS: dict[str, frozenset[str]] = {
    "INSERT": _words("INTO OVERWRITE TABLE IGNORE OR REPLACE ALL FIRST"),
    "REPLACE": frozenset({"INTO"}),
    "MERGE": frozenset({"INTO"}),
    "UPDATE": frozenset({"ONLY"}),
    "DELETE": frozenset({"FROM"}),
    "TRUNCATE": frozenset({"TABLE"}),
    "COPY": frozenset({"INTO"}),
    "DROP": _words(
        "TABLE VIEW IF EXISTS MATERIALIZED PROCEDURE PROC FUNCTION SCHEMA INDEX SEQUENCE "
        "TEMPORARY TEMP EXTERNAL TRIGGER"
    ),
}
_NAME_SKIPS = frozenset({"IF", "NOT", "EXISTS", "BODY", "ONLY"})
_NOT_NAMES = frozenset(
    {
        "(",
        "SELECT",
        "WITH",
        "AS",
        "VALUES",
        "SET",
        "FROM",
        "WHERE",
        "ON",
        "USING",
        "DEFAULT",
        "BEGIN",
        "IS",
    }
)


def _read_name(
    lx: Sequence[_Lexeme], k: int, stop: int, skip: frozenset[str] = _NAME_SKIPS
) -> tuple[str | None, int]:
    """A dotted name starting at `k` (after words in `skip`), lower-cased; and what follows."""
    while k <= stop and lx[k].head in skip:
        k += 1
    parts: list[str] = []
    while k <= stop and lx[k].kind in _NAMEISH and not (not parts and lx[k].head in _NOT_NAMES):
        parts.append(lx[k].name)
        k += 1
        if k <= stop and lx[k].word == "." and k + 1 <= stop:
            k += 1
            continue
        break
    return (".".join(parts) or None), k


def _classify(seq: Sequence[_Lexeme]) -> tuple[str, str | None]:
    """The chunk type and target name of one statement."""
    return _classify_at(seq, 0, _match_parens(seq, len(seq)))


def _classify_at(seq: Sequence[_Lexeme], k: int, match: list[int]) -> tuple[str, str | None]:
    j = len(seq) - 1
    while k <= j and seq[k].word == "(":
        k += 1
    head = seq[k].head if k <= j else ""
    if head == "WITH":
        _, main = _cte_walk(seq, k, j, match)
        return _classify_at(seq, main, match) if main is not None else ("sql_statement", None)
    if head in ("CREATE", "ALTER"):
        return _classify_definition(seq, k, j, head)
    skip = _TARGET_SKIPS.get(head)
    if skip is not None:
        return "sql_statement", _read_name(seq, k + 1, j, skip)[0]
    return "sql_statement", None


def _classify_definition(
    lx: Sequence[_Lexeme], k: int, j: int, head: str
) -> tuple[str, str | None]:
    for m in range(k + 1, min(k + 16, j + 1)):
        word = lx[m].head
        if word == "TABLE" and m + 1 <= j and lx[m + 1].head == "FUNCTION":
            continue
        if word in _OBJECT_TYPES:
            kind = "sql_statement" if head == "ALTER" and word == "TABLE" else _OBJECT_TYPES[word]
            return kind, _read_name(lx, m + 1, j)[0]
        if word in _OTHER_OBJECTS:
            return "sql_statement", _read_name(lx, m + 1, j)[0]
        if word in ("AS", "SELECT", "("):
            break
    return "sql_statement", None


def _match_parens(lx: Sequence[_Lexeme], stop: int) -> list[int]:
    """For each `(` in lx[:stop], the index of its `)` (the last index when unbalanced)."""
    match = list(range(stop))
    opened: list[int] = []
    for k in range(stop):
        if lx[k].word == "(":
            opened.append(k)
        elif lx[k].word == ")" and opened:
            match[opened.pop()] = k
    for k in opened:
        match[k] = stop - 1
    return match


def _cte_walk(
    lx: Sequence[_Lexeme], k: int, stop: int, match: list[int]
) -> tuple[list[int], int | None]:
    """Indices of the CTE names of the WITH at `k`, and of the statement that follows them."""
    names: list[int] = []
    m = k + 1
    if m <= stop and lx[m].head == "RECURSIVE":
        m += 1
    while m <= stop and lx[m].kind in _NAMEISH:
        name_at = m
        m += 1
        if m <= stop and lx[m].word == "(":
            m = match[m] + 1
        if m > stop or lx[m].head != "AS":
            break
        m += 1
        while m <= stop and lx[m].head in ("MATERIALIZED", "NOT"):
            m += 1
        if m > stop or lx[m].word != "(":
            break
        names.append(name_at)
        m = match[m] + 1
        if m > stop or lx[m].word != ",":
            return names, (m if m <= stop and names else None)
        m += 1
    return names, None


# -- SQL: boundaries inside a statement -------------------------------------------------------

_PROCEDURAL_WORDS = _words(
    "DECLARE SET IF ELSIF ELSEIF ELSE WHILE FOR LOOP BEGIN RETURN EXEC EXECUTE CALL INSERT "
    "UPDATE DELETE MERGE SELECT WITH TRUNCATE CREATE DROP ALTER OPEN FETCH CLOSE RAISE "
    "RAISERROR THROW PRINT COMMIT ROLLBACK EXCEPTION PERFORM LET"
)
_SET_OPERATORS = frozenset({"UNION", "INTERSECT", "EXCEPT", "MINUS"})
_CLAUSE_WORDS = _words(
    "SELECT FROM WHERE GROUP HAVING ORDER QUALIFY WINDOW LIMIT OFFSET VALUES SET RETURNING "
    "USING CLUSTER DISTRIBUTE SORT CONNECT PIVOT UNPIVOT INSERT INTO PARTITION"
)
_JOIN_WORDS = _words(
    "JOIN LEFT RIGHT INNER FULL CROSS OUTER NATURAL STRAIGHT_JOIN ANTI SEMI LATERAL ASOF POSITIONAL"
)
_CONDITION_WORDS = frozenset({"AND", "OR", "ON", "WHEN", "ELSE"})
_PROCEDURAL_TYPES = frozenset({"sql_procedure", "sql_function"})


@dataclass
class _SqlScope:
    """One statement being marked: its label and whether its body is procedural code."""

    layout: _Layout
    label: _Label
    procedural: bool
    ctes: set[str]


def _mark_sequence(scope: _SqlScope, seq: Sequence[_Lexeme]) -> None:
    """Add the boundaries (and CTE labels) of one statement or routine body."""
    match = _match_parens(seq, len(seq))
    depth = 0
    for k, lexeme in enumerate(seq):
        if lexeme.word == ")":
            depth = max(depth - 1, 0)
        if k and lexeme.line > seq[k - 1].end_line:
            rank = _rank(seq, k, scope.procedural)
            if rank is not None:
                line = _lift(
                    scope.layout.lines, lexeme.line, seq[k - 1].end_line, scope.layout.unsafe
                )
                scope.layout.add_boundary(line, (min(depth, _MAX_DEPTH), rank))
        if lexeme.head == "WITH":
            _mark_ctes(scope, seq, k, match, depth)
        if lexeme.word == "(":
            depth += 1


def _rank(seq: Sequence[_Lexeme], k: int, procedural: bool) -> int | None:
    word, previous = seq[k].head, seq[k - 1].word
    following = seq[k + 1].head if k + 1 < len(seq) else ""
    if previous == ";" or (procedural and word in _PROCEDURAL_WORDS and previous != "THEN"):
        return 0
    if word in _SET_OPERATORS:
        return 2
    if word in _CLAUSE_WORDS or (word == "WHEN" and following in ("MATCHED", "NOT")):
        return 3
    if word in _JOIN_WORDS:
        return 4
    if word in _CONDITION_WORDS:
        return 5
    return None


def _mark_ctes(
    scope: _SqlScope, seq: Sequence[_Lexeme], k: int, match: list[int], depth: int
) -> None:
    names, main = _cte_walk(seq, k, len(seq) - 1, match)
    key = (min(depth, _MAX_DEPTH), 1)
    for at in names:
        scope.ctes.add(seq[at].name)
        line = _cte_line(scope, seq, at)
        scope.layout.add_boundary(line, key)
        scope.layout.labels[line] = _Label("sql_cte", seq[at].name, scope.label.name)
    if names and main is not None:
        line = _cte_line(scope, seq, main)
        scope.layout.add_boundary(line, key)
        scope.layout.labels[line] = scope.label


def _cte_line(scope: _SqlScope, seq: Sequence[_Lexeme], at: int) -> int:
    lexeme = seq[at]
    if at and lexeme.first and lexeme.line > seq[at - 1].end_line:
        return _lift(scope.layout.lines, lexeme.line, seq[at - 1].end_line, scope.layout.unsafe)
    return lexeme.line


# -- SQL: names a chunk refers to -------------------------------------------------------------

_TABLE_INTRO = _words("FROM JOIN INTO UPDATE TABLE VIEW USING")
_FROM_LIKE = frozenset({"FROM", "JOIN", "USING"})
_TABLE_SKIPS = _words("IF NOT EXISTS ONLY OVERWRITE TABLE INTO LATERAL")
_INTO_TABLE_AFTER = _words("INSERT MERGE REPLACE COPY OVERWRITE IGNORE")
_NAME_CONSUMERS = _words(
    "PROCEDURE PROC FUNCTION TRIGGER PACKAGE EXEC EXECUTE CALL SCHEMA DATABASE INDEX SEQUENCE "
    "TYPE END USE"
)
_NOT_COLUMNS = _words(
    "IF ELSIF ELSEIF WHILE LOOP RETURNS LANGUAGE PLPGSQL SQL NOLOCK IMMUTABLE STABLE VOLATILE "
    "STRICT SECURITY DEFINER INVOKER OWNER CASCADE RESTRICT NOCOUNT OFF ANSI_NULLS "
    "QUOTED_IDENTIFIER XACT_ABORT TRY CATCH TRAN TRANSACTION OUTPUT READONLY PARALLEL SAFE "
    "UNSAFE COST NOTICE RAISE PERFORM RECORD REFCURSOR CURSOR VARCHAR2 NVARCHAR INT64 FLOAT64 "
    "BOOL JAVASCRIPT PYTHON HANDLER CALLER RUNTIME_VERSION PACKAGES FOUND ROWCOUNT EXCEPTION "
    "ELSE THEN DO NONE TEMP TEMPORARY TRANSIENT SECURE RECURSIVE LOCAL GLOBAL DECLARE CONTINUE "
    "OPEN CLOSE LEAVE RETURN VAR LET OTHERS OTHER MATCHED ITERATE EXIT FETCH DEALLOCATE PREPARE "
    "THROW AFTER BEFORE EACH ROW INSTEAD SCHEMABINDING ENCRYPTION RECOMPILE NEW OLD"
)
_DBT_REF = re.compile(
    r"""\b(ref|source)\s*\(\s*['"]([^'"]+)['"]\s*(?:,\s*['"]([^'"]+)['"]\s*)?\)"""
)


def _scan_names(seq: Sequence[_Lexeme], ctes: set[str]) -> tuple[set[str], set[str]]:
    """Tables (after FROM, JOIN, INTO...) and columns (the other plain names) in `seq`."""
    tables: set[str] = set()
    used: set[int] = set()
    k = 0
    while k < len(seq):
        head = seq[k].head
        if head in _TABLE_INTRO and _introduces_table(seq, k):
            k = _read_tables(seq, k, tables, used, ctes)
        elif head in _NAME_CONSUMERS:
            _, after = _read_name(seq, k + 1, len(seq) - 1)
            used.update(range(k, after))
            k = max(after, k + 1)
        else:
            k += 1
    columns = {seq[k].name for k in range(len(seq)) if _is_column(seq, k, used, ctes)}
    return tables, columns


def _introduces_table(seq: Sequence[_Lexeme], k: int) -> bool:
    """`INTO` names a table after INSERT/MERGE; after a SELECT list only when qualified
    (`SELECT ... INTO v_total` fills a variable in procedural code)."""
    if seq[k].head != "INTO":
        return True
    if any(seq[m].head in _INTO_TABLE_AFTER for m in range(max(k - 3, 0), k)):
        return True
    name, _ = _read_name(seq, k + 1, len(seq) - 1)
    return name is not None and ("." in name or name.startswith("#"))


def _read_tables(
    seq: Sequence[_Lexeme], k: int, tables: set[str], used: set[int], ctes: set[str]
) -> int:
    intro = seq[k].head
    m = k + 1
    while True:
        name, after = _read_name(seq, m, len(seq) - 1, _TABLE_SKIPS)
        if name is None or (intro in _FROM_LIKE and after < len(seq) and seq[after].word == "("):
            return max(after, k + 1)
        used.update(range(m, after))
        if name not in ctes and _real_name(name):
            tables.add(name)
        m = after
        if m < len(seq) and seq[m].head == "AS":
            m += 1
        if m < len(seq) and seq[m].kind == _WORD:
            used.add(m)
            m += 1
        if not (intro in _FROM_LIKE and m < len(seq) and seq[m].word == ","):
            return m
        m += 1


def _real_name(name: str) -> bool:
    """Not a variable (`@t`, `:v`) nor a Jinja placeholder (`____`)."""
    return bool(name) and name[0] not in "@:$" and name.strip("_.") != ""


def _is_column(seq: Sequence[_Lexeme], k: int, used: set[int], ctes: set[str]) -> bool:
    lexeme = seq[k]
    if k in used or lexeme.kind not in (_WORD, _QUOTED) or not _real_name(lexeme.name):
        return False
    if k + 1 < len(seq) and seq[k + 1].word in ("(", "."):
        return False
    if lexeme.name[0] == "#" or lexeme.name in ctes or " " in lexeme.name:
        return False
    return lexeme.kind == _QUOTED or lexeme.head not in _NOT_COLUMNS


def _dbt_refs(text: str) -> set[str]:
    found = set()
    for match in _DBT_REF.finditer(text):
        kind, first, second = match.groups()
        if kind == "source" and second:
            found.add(f"{first}.{second}".lower())
        else:
            found.add((second or first).lower())
    return found


# -- SQL: the layout --------------------------------------------------------------------------


def _has_jinja(text: str) -> bool:
    return "{{" in text or "{%" in text or "{#" in text


def _dbt_model_name(path: str, text: str) -> str | None:
    parts = PurePosixPath(path).parts
    return PurePosixPath(path).stem if "models" in parts[:-1] and "{{" in text else None


def _sql_layout(
    path: str, text: str, lines: list[str], offsets: list[int], dialect: str | None
) -> _Layout:
    sql_dialect = _sql_dialect(dialect)
    clean, jinja = _blank_jinja(text) if _has_jinja(text) else (text, [])
    if sql_dialect.name in ("", "mysql"):
        clean = _neutralise_delimiters(clean)
    lexed = _lex(clean, 0, _lexing_dialect(sql_dialect, clean))
    lexemes = lexed.lexemes
    _locate(lexemes, offsets)
    statements = _Statements(lexemes, sql_dialect.name)
    ranges = _join_shared_lines(lexemes, statements.split())
    for i, j in ranges:
        _drop_foreign_bodies(lexemes[i : j + 1])
    layout = _Layout(lines, offsets, [])
    strings = [(x.start, x.end) for x in lexemes if x.end_line > x.line and not x.inner]
    layout.unsafe = _unsafe_lines([*lexed.spans, *jinja, *strings], offsets)
    model = _dbt_model_name(path, text)
    ctes: set[str] = set()
    layout.units = _sql_units(layout, statements, ranges, model, ctes)
    layout.merge = _sql_merge
    layout.meta = _SqlMeta(lexemes, ctes, text).meta
    return layout


def _lexing_dialect(dialect: _SqlDialect, text: str) -> _SqlDialect:
    """Without a dialect, `$$` bodies still need a tokenizer that knows dollar quotes."""
    if dialect.name == "" and "$" in text and _DOLLAR_QUOTE.search(text):
        return _sql_dialect("postgres")
    return dialect


def _drop_foreign_bodies(seq: Sequence[_Lexeme]) -> None:
    """A body in JavaScript, Python... is not SQL: keep it one opaque string."""
    foreign = any(
        x.head == "LANGUAGE" and k + 1 < len(seq) and seq[k + 1].name in _FOREIGN_LANGUAGES
        for k, x in enumerate(seq)
    )
    if foreign:
        for lexeme in seq:
            lexeme.inner = None


def _sql_units(
    layout: _Layout,
    statements: _Statements,
    ranges: list[tuple[int, int]],
    model: str | None,
    ctes: set[str],
) -> list[_Unit]:
    total = len(layout.lines)
    if not ranges:
        return [_Unit(0, total, _Label("dbt_model", model) if model else _Label("sql_statement"))]
    lexemes = statements.lx
    units: list[_Unit] = []
    for i, j in ranges:
        start = units[-1].end if units else 0
        label, procedural = _statement_label(statements, lexemes, i, j, model)
        scope = _SqlScope(layout, label, procedural, ctes)
        _mark_statement(scope, lexemes[i : j + 1])
        head = f"dbt model {model}" if model else layout.lines[lexemes[i].line].strip()[:100]
        context = ((lexemes[i].line, f"-- {head} ..."),)
        units.append(_Unit(start, lexemes[j].end_line + 1, label, context, model is None))
    units[-1] = replace(units[-1], end=total)
    return units


def _join_shared_lines(
    lexemes: list[_Lexeme], ranges: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    joined: list[tuple[int, int]] = []
    for i, j in ranges:
        if joined and lexemes[i].line <= lexemes[joined[-1][1]].end_line:
            joined[-1] = (joined[-1][0], j)
        else:
            joined.append((i, j))
    return joined


def _statement_label(
    statements: _Statements, lexemes: list[_Lexeme], i: int, j: int, model: str | None
) -> tuple[_Label, bool]:
    kind, name = _classify(lexemes[i : j + 1])
    block = lexemes[i].word in ("BEGIN", "DECLARE") or statements.is_routine(i)
    procedural = kind in _PROCEDURAL_TYPES or block
    if model is not None:
        return _Label("dbt_model", model), procedural
    return _Label(kind, name), procedural


def _mark_statement(scope: _SqlScope, seq: list[_Lexeme]) -> None:
    _mark_sequence(scope, seq)
    body_scope = replace(scope, procedural=True)
    for lexeme in seq:
        if lexeme.inner:
            _mark_sequence(body_scope, lexeme.inner)


def _sql_merge(a: _Label, b: _Label) -> _Label | None:
    if a.chunk_type == b.chunk_type == "sql_statement":
        return _merge_names(a, b, "sql_statement")
    if a.name is not None and a.name == b.name and "sql_statement" in (a.chunk_type, b.chunk_type):
        kind = b.chunk_type if a.chunk_type == "sql_statement" else a.chunk_type
        return _Label(kind, a.name)
    return None


class _SqlMeta:
    """Tables and columns of a piece, from the lexemes inside it (and dbt refs)."""

    def __init__(self, lexemes: list[_Lexeme], ctes: set[str], text: str) -> None:
        flat: list[_Lexeme] = []
        for lexeme in lexemes:
            flat.extend(lexeme.inner if lexeme.inner else [lexeme])
        flat.sort(key=lambda x: x.start)
        self.lexemes = flat
        self.starts = [x.start for x in flat]
        self.ctes = ctes
        self.text = text

    def meta(self, piece: _Piece) -> Meta:
        lo = bisect_left(self.starts, piece.start)
        hi = bisect_left(self.starts, piece.stop)
        tables, columns = _scan_names(self.lexemes[lo:hi], self.ctes)
        tables |= _dbt_refs(self.text[piece.start : piece.stop])
        return tuple(sorted(tables)), tuple(sorted(columns - tables))


# -- Python -----------------------------------------------------------------------------------

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _python_layout(text: str, lines: list[str], offsets: list[int]) -> _Layout | None:
    if "\r" in text:  # ast counts a lone CR as a line break; our line numbers would drift
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    builder = _PythonUnits(lines)
    builder.module(tree.body)
    units = _partition(builder.entries, len(lines))
    if not units:
        return None
    layout = _Layout(lines, offsets, units)
    layout.unsafe = _python_unsafe(tree)
    _python_boundaries(layout, tree.body, 0, 0)
    return layout


def _node_start(lines: Sequence[str], node: ast.stmt, floor: int) -> int:
    """0-based first line of a statement: its decorators and the comments right above it."""
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    line = min([d.lineno for d in decorators] + [node.lineno]) - 1
    while line - 1 >= floor and lines[line - 1].lstrip().startswith("#"):
        line -= 1
    return line


def _end_line(node: ast.AST) -> int:
    """1-based last line (equally: the 0-based index of the line after the node)."""
    end: int | None = getattr(node, "end_lineno", None)
    return end if end is not None else int(getattr(node, "lineno", 0))


class _PythonUnits:
    """Module statements, functions, classes and methods as unit entries."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.entries: list[_Entry] = []
        self.floor = 0

    def module(self, body: list[ast.stmt]) -> None:
        grouped = False
        for node in body:
            if isinstance(node, _FUNCTIONS):
                self._function(node, None)
            elif isinstance(node, ast.ClassDef):
                self._class(node, None)
            elif not grouped:
                self._add(node, _Label("python_module"), ())
            grouped = not isinstance(node, (*_FUNCTIONS, ast.ClassDef))
            self.floor = _end_line(node)

    def _add(self, node: ast.stmt, label: _Label, context: Context) -> None:
        self.entries.append(_Entry(_node_start(self.lines, node, self.floor), label, context))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, owner: str | None) -> None:
        name = f"{owner}.{node.name}" if owner else node.name
        self._add(node, _Label("python_function", name, owner), self._header(node))

    def _class(self, node: ast.ClassDef, owner: str | None) -> None:
        name = f"{owner}.{node.name}" if owner else node.name
        label = _Label("python_class", name, owner)
        header = self._header(node)
        self._add(node, label, header)
        self.floor = node.lineno
        grouped = True  # the docstring and the attributes right after the header go with it
        for child in node.body:
            if isinstance(child, _FUNCTIONS):
                self._function(child, name)
            elif isinstance(child, ast.ClassDef):
                self._class(child, name)
            elif not grouped:
                self._add(child, label, header)
            grouped = not isinstance(child, (*_FUNCTIONS, ast.ClassDef))
            self.floor = _end_line(child)

    def _header(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> Context:
        """The `def`/`class` line(s), up to the body, as context for the parts after them."""
        first = node.lineno - 1
        last = max(node.body[0].lineno - 1, first + 1)
        while last > first + 1 and _blank_or_comment(self.lines[last - 1]):
            last -= 1
        return ((first, "\n".join(self.lines[first:last])),)


def _blank_or_comment(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _python_unsafe(tree: ast.Module) -> set[int]:
    """Lines that start inside a multi-line string."""
    unsafe: set[int] = set()
    for node in ast.walk(tree):
        is_string = isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))
        )
        if is_string and _end_line(node) > getattr(node, "lineno", 0):
            unsafe.update(range(getattr(node, "lineno", 0), _end_line(node)))
    return unsafe


def _python_boundaries(layout: _Layout, body: list[ast.stmt], depth: int, floor: int) -> None:
    """Every statement start is a boundary at its nesting depth; `except` lines too."""
    key_depth = min(depth, _MAX_DEPTH)
    for node in body:
        start = _node_start(layout.lines, node, floor)
        layout.add_boundary(start, (key_depth, 0))
        for child_body in _child_bodies(node):
            _python_boundaries(layout, child_body, depth + 1, node.lineno)
        for handler in getattr(node, "handlers", []):
            layout.add_boundary(handler.lineno - 1, (key_depth, 1))
            _python_boundaries(layout, handler.body, depth + 1, handler.lineno)
        for case in getattr(node, "cases", []):
            layout.add_boundary(case.pattern.lineno - 1, (key_depth, 1))
            _python_boundaries(layout, case.body, depth + 1, case.pattern.lineno)
        floor = _end_line(node)


def _child_bodies(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        value = getattr(node, name, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield value


# -- YAML -------------------------------------------------------------------------------------

_YAML_LINE = re.compile(
    r"^( *)(-(?: +|$))?(?:([^\s#:'\"][^:#]*?|'[^']*'|\"[^\"]*\") *:(?: +|$))?(.*)$"
)
_BLOCK_SCALAR = re.compile(r"^[|>][-+0-9]*\s*(#.*)?$")
_YAML_KINDS = {"sources": "yaml_source", "models": "yaml_model"}


@dataclass(frozen=True, slots=True)
class _YamlLine:
    indent: int
    key: str | None
    item: bool
    value: str


def _yaml_lines(lines: list[str]) -> list[_YamlLine | None]:
    """Structural lines (keys, list items, scalars); None for blanks, comments, block text."""
    parsed: list[_YamlLine | None] = []
    block_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if block_indent is not None and (not stripped or indent > block_indent):
            parsed.append(None)
            continue
        block_indent = None
        match = _YAML_LINE.match(line)
        if not stripped or stripped.startswith("#") or match is None:
            parsed.append(None)
            continue
        key = match.group(3).strip("'\"") if match.group(3) else None
        value = match.group(4).strip()
        parsed.append(_YamlLine(indent, key, match.group(2) is not None, value))
        if key is not None and _BLOCK_SCALAR.match(value):
            block_indent = indent
    return parsed


@dataclass
class _YamlFacts:
    """What dbt YAML declares, per line: parents, item names, sources, tables, columns."""

    parents: list[int]
    item_names: dict[int, str]
    tables: dict[int, str]
    columns: dict[int, str]
    owners: dict[int, str]


def _yaml_facts(parsed: list[_YamlLine | None]) -> _YamlFacts:
    facts = _YamlFacts([-1] * len(parsed), {}, {}, {}, {})
    stack: list[tuple[int, int, str]] = []  # (indent, line, key or "-" for a list item)
    for i, info in enumerate(parsed):
        if info is None:
            continue
        while stack and _yaml_closes(stack[-1], info):
            stack.pop()
        facts.parents[i] = stack[-1][1] if stack else -1
        if info.item:
            facts.owners[i] = stack[-1][2] if stack else ""
            stack.append((info.indent, i, "-"))
        if info.key == "name" and info.value and stack and stack[-1][2] == "-":
            _yaml_name(facts, stack, i, info.value.strip("'\""))
        if info.key is not None and not info.item:
            stack.append((info.indent, i, info.key))
    return facts


def _yaml_closes(open_line: tuple[int, int, str], info: _YamlLine) -> bool:
    """Does `info` end the open key or item? (`key:` may have its `- items` at its indent.)"""
    indent, _, key = open_line
    if indent != info.indent:
        return indent > info.indent
    return not (info.item and key != "-")


def _yaml_name(facts: _YamlFacts, stack: list[tuple[int, int, str]], line: int, name: str) -> None:
    items = [at for _, at, key in stack if key == "-"]
    item = items[-1]
    facts.item_names.setdefault(item, name)
    owner = facts.owners.get(item)
    if owner == "columns":
        facts.columns[line] = name.lower()
    elif owner == "tables":
        sources = [at for at in items if facts.owners.get(at) == "sources"]
        source = facts.item_names.get(sources[-1]) if sources else None
        facts.tables[line] = f"{source}.{name}".lower() if source else name.lower()


def _yaml_layout(lines: list[str], offsets: list[int]) -> _Layout | None:
    parsed = _yaml_lines(lines)
    facts = _yaml_facts(parsed)
    entries: list[_Entry] = []
    tops = [i for i, info in enumerate(parsed) if info is not None and facts.parents[i] < 0]
    for n, top in enumerate(tops):
        end = tops[n + 1] if n + 1 < len(tops) else len(lines)
        floor = tops[n - 1] if n else -1
        info = parsed[top]
        key = info.key if info is not None else None
        entries.extend(_yaml_entries(lines, facts, key, top, end, floor))
    units = _partition(entries, len(lines))
    if not units:
        return None
    layout = _Layout(lines, offsets, units)
    _yaml_boundaries(layout, parsed)
    layout.context_of = lambda unit, line: _yaml_context(lines, parsed, facts, line)
    layout.merge = _yaml_merge
    layout.meta = lambda piece: _yaml_meta(facts, piece)
    return layout


def _yaml_entries(
    lines: list[str], facts: _YamlFacts, key: str | None, top: int, end: int, floor: int
) -> list[_Entry]:
    """One entry for a top-level block; one per entry of a dbt `sources:`/`models:` list."""
    start = _lift_yaml(lines, top, floor)
    kind = _YAML_KINDS.get(key or "")
    items = [
        i for i in range(top + 1, end) if facts.owners.get(i) == key and facts.parents[i] == top
    ]
    if kind is None or not items:
        return [_Entry(start, _Label("yaml", key), mergeable=True)]
    entries = [_Entry(start, _Label(kind, facts.item_names.get(items[0])))]
    for previous, item in pairwise(items):
        label = _Label(kind, facts.item_names.get(item))
        entries.append(_Entry(_lift_yaml(lines, item, previous), label))
    return entries


def _lift_yaml(lines: list[str], line: int, floor: int) -> int:
    while line - 1 > floor and lines[line - 1].strip().startswith("#"):
        line -= 1
    return line


def _yaml_boundaries(layout: _Layout, parsed: list[_YamlLine | None]) -> None:
    previous = -1
    for i, info in enumerate(parsed):
        if info is None:
            continue
        line = _lift_yaml(layout.lines, i, previous)
        layout.add_boundary(line, (min(info.indent, _MAX_DEPTH), 0 if info.item else 1))
        previous = i


def _yaml_context(
    lines: list[str], parsed: list[_YamlLine | None], facts: _YamlFacts, line: int
) -> tuple[str, ...]:
    """The lines of the keys and items that enclose `line`, outermost first."""
    first = next((i for i in range(line, len(parsed)) if parsed[i] is not None), None)
    if first is None:
        return ()
    chain: list[str] = []
    parent = facts.parents[first]
    while parent >= 0:
        chain.append(lines[parent].rstrip())
        parent = facts.parents[parent]
    return tuple(reversed(chain))


def _yaml_merge(a: _Label, b: _Label) -> _Label | None:
    return _merge_names(a, b, "yaml") if a.chunk_type == b.chunk_type == "yaml" else None


def _yaml_meta(facts: _YamlFacts, piece: _Piece) -> Meta:
    lines = range(piece.first, piece.last + 1)
    tables = sorted({facts.tables[i] for i in lines if i in facts.tables})
    columns = sorted({facts.columns[i] for i in lines if i in facts.columns})
    return tuple(tables), tuple(columns)


# -- Markdown ---------------------------------------------------------------------------------

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


@dataclass(frozen=True, slots=True)
class _Heading:
    line: int  # first line (the text line of a setext heading)
    level: int
    text: str
    end: int  # last line (the underline of a setext heading)


class _MarkdownScan:
    """Headings outside code fences and front matter, and split points inside sections."""

    def __init__(self, lines: list[str], layout: _Layout) -> None:
        self.lines = lines
        self.layout = layout
        self.headings: list[_Heading] = []
        self.fence: str | None = None

    def run(self) -> list[_Heading]:
        start = self._front_matter()
        for i in range(start, len(self.lines)):
            self._line(i)
        return self.headings

    def _front_matter(self) -> int:
        if not self.lines or self.lines[0].strip() != "---":
            return 0
        for i in range(1, len(self.lines)):
            if self.lines[i].strip() in ("---", "..."):
                return i + 1
        return 0

    def _line(self, i: int) -> None:
        line = self.lines[i]
        fence = _FENCE.match(line)
        if self.fence is not None:
            if (
                fence
                and fence.group(1)[0] == self.fence[0]
                and len(fence.group(1)) >= len(self.fence)
            ):
                self.fence = None
            elif line.strip() and i and not self.lines[i - 1].strip():
                self.layout.add_boundary(i, (1, 0))
            return
        if fence:
            self.fence = fence.group(1)
            self.layout.add_boundary(i, (0, 0))
            return
        self._heading_or_text(i, line)

    def _heading_or_text(self, i: int, line: str) -> None:
        atx = _ATX.match(line)
        if atx:
            self.headings.append(_Heading(i, len(atx.group(1)), (atx.group(2) or "").strip(), i))
            return
        setext = _SETEXT.match(line)
        if setext and self._paragraph_line(i - 1):
            level = 1 if setext.group(1)[0] == "=" else 2
            self.headings.append(_Heading(i - 1, level, self.lines[i - 1].strip(), i))
            return
        if line.strip() and (i == 0 or not self.lines[i - 1].strip()):
            self.layout.add_boundary(i, (0, 0))
        elif _LIST_ITEM.match(line):
            self.layout.add_boundary(i, (0, 1))

    def _paragraph_line(self, i: int) -> bool:
        if i < 0 or not self.lines[i].strip() or _ATX.match(self.lines[i]):
            return False
        return not (self.headings and self.headings[-1].line == i)


def _markdown_layout(lines: list[str], offsets: list[int]) -> _Layout:
    layout = _Layout(lines, offsets, [])
    headings = _MarkdownScan(lines, layout).run()
    entries: list[_Entry] = []
    if not headings or headings[0].line > 0:
        entries.append(_Entry(0, _Label("markdown_section")))
    path: list[_Heading] = []
    for heading in headings:
        while path and path[-1].level >= heading.level:
            path.pop()
        parent = path[-1].text if path else None
        path.append(heading)
        context = tuple((h.line, f"{'#' * h.level} {h.text}") for h in path)
        entries.append(
            _Entry(heading.line, _Label("markdown_section", heading.text, parent), context)
        )
    layout.units = _fold_empty_sections(lines, _partition(entries, len(lines)), headings)
    return layout


def _fold_empty_sections(
    lines: list[str], units: list[_Unit], headings: list[_Heading]
) -> list[_Unit]:
    """A heading with nothing under it before the next heading joins the next section."""
    heading_lines = {i for h in headings for i in range(h.line, h.end + 1)}
    folded: list[_Unit] = []
    carry: int | None = None
    for k, unit in enumerate(units):
        start = carry if carry is not None else unit.start
        empty = all(not lines[i].strip() or i in heading_lines for i in range(unit.start, unit.end))
        if empty and k + 1 < len(units):
            carry = start
            continue
        carry = None
        folded.append(replace(unit, start=start))
    return folded
