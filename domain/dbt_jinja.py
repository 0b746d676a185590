"""Scanning a dbt model's Jinja without running it (pure, no I/O).

:func:`scan_jinja` finds every ``ref()``/``source()`` call (in expressions, statements and SQL
comments alike, as dbt's parser does), the ``config()`` arguments, and renders the text to
plain SQL for sqlglot with the original line count kept:

- ``{# ... #}`` comments are removed;
- ``{{ ref(...) }}``/``{{ source(...) }}``/``{{ this }}`` become the relation names the caller
  chooses, ``{{ config(...) }}`` disappears, any other ``{{ ... }}`` becomes :data:`PLACEHOLDER`;
- ``{% if %}`` keeps its first branch (``is_incremental()`` blocks included), ``{% for %}``
  keeps its body once (``loop.last`` conditions are decided for that single pass), ``{% set %}``
  blocks, ``{% call %}`` and ``{% macro %}`` bodies are dropped;
- every call found inside an ``if``/``for`` block (or a macro body) is ``conditional``.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PLACEHOLDER = "__dbt_expr__"
"""Stands for a macro or other expression: an identifier, so it parses wherever SQL expects
a value or a name. Column and table names containing it are dropped from the results."""

_TAG = re.compile(r"\{#.*?#\}|\{%.*?%\}|\{\{.*?\}\}", re.DOTALL)
_ENDRAW = re.compile(r"\{%-?\s*endraw\s*-?%\}")
_CALL = re.compile(r"(?<![\w.])(ref|source)\s*\(")
_STRING = re.compile(r"""\s*(?:'([^'\\]*)'|"([^"\\]*)")\s*""")
_KEYWORD_ARG = re.compile(r"\s*[A-Za-z_]\w*\s*=")
_DEPENDS_ON = re.compile(r"--.*\bdepends_on\s*:", re.IGNORECASE)
_LINE_COMMENT = re.compile(r"--")
_WORD = re.compile(r"\s*(\w+)")

# Block statements whose body is not SQL of the model (dropped from the rendering).
_DROPPED_BLOCKS = {
    "macro": "endmacro",
    "call": "endcall",
    "filter": "endfilter",
    "docs": "enddocs",
    "test": "endtest",
    "materialization": "endmaterialization",
    "set": "endset",
}
_KEPT_BLOCKS = {"snapshot": "endsnapshot", "block": "endblock"}
_CONDITIONAL_BLOCKS = {"if": "endif", "for": "endfor"}
_ENDINGS = {
    **{end: start for start, end in _DROPPED_BLOCKS.items()},
    **{end: start for start, end in _KEPT_BLOCKS.items()},
    **{end: start for start, end in _CONDITIONAL_BLOCKS.items()},
}
# Conditions that are false in a loop rendered exactly once.
_FALSE_IN_SINGLE_PASS = re.compile(r"^not\s+loop\.(last|first)$|^loop\.(index0|revindex0)$")
_NOT_MACROS = frozenset({"var", "env_var", "run_query", "log", "return", "print"})
_LIST_MACROS = ("key", "hash", "concat", "coalesce")
_COLUMN_ARG = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$")
_DATE_PARTS = frozenset(
    {
        "year",
        "quarter",
        "month",
        "week",
        "day",
        "hour",
        "minute",
        "second",
        "millisecond",
        "microsecond",
        "dayofweek",
        "dayofyear",
        "isoweek",
        "date",
    }
)
_JINJA_CONSTANTS = {"true": True, "false": False, "none": None, "True": True, "False": False}


@dataclass(frozen=True)
class DbtCall:
    """One ``ref('m')``, ``ref('pkg', 'm')`` or ``source('s', 't')`` found in the text."""

    function: str  # "ref" | "source"
    args: tuple[str, ...]  # the positional string arguments
    line_start: int
    line_end: int
    conditional: bool  # inside an {% if %}/{% for %} block or a macro body
    depends_on: bool  # written as a `-- depends_on: {{ ref(...) }}` hint
    in_comment: bool  # inside a SQL line comment (dbt still registers it)

    @property
    def model(self) -> str:
        """The referenced model for ``ref`` (the last positional argument)."""
        return self.args[-1]

    @property
    def package(self) -> str | None:
        return self.args[0] if self.function == "ref" and len(self.args) > 1 else None


@dataclass(frozen=True)
class JinjaScan:
    """What a dbt SQL file says, and the same text rendered to plain SQL (same lines)."""

    rendered: str
    calls: tuple[DbtCall, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    snapshot: str | None = None  # the name in `{% snapshot name %}`
    warnings: tuple[str, ...] = ()


@dataclass
class _Frame:
    kind: str  # "if" | "for" | "dropped" | "kept"
    ending: str
    line: int
    chosen: int = 0  # the branch that is rendered
    branch: int = 0  # the branch being read

    @property
    def rendered(self) -> bool:
        return self.kind != "dropped" and self.branch == self.chosen

    @property
    def conditional(self) -> bool:
        return self.kind in {"if", "for"} or self.ending == "endmacro"


Renderer = Callable[[DbtCall], str]


class _Lines:
    def __init__(self, text: str) -> None:
        self.text = text
        self.breaks = [index for index, char in enumerate(text) if char == "\n"]

    def line(self, offset: int) -> int:
        return bisect.bisect_left(self.breaks, offset) + 1

    def line_prefix(self, offset: int) -> str:
        start = self.text.rfind("\n", 0, offset) + 1
        return self.text[start:offset]


def scan_jinja(
    text: str, render_call: Renderer, this: str, *, blank_standalone: bool = False
) -> JinjaScan:
    """Scan a dbt SQL file; ``render_call`` names the relation a ref/source renders to,
    ``this`` is what ``{{ this }}`` renders to. With ``blank_standalone`` a macro call alone
    on its line(s) renders to nothing instead of :data:`PLACEHOLDER` (a clause such as
    ``{{ limit_in_dev() }}`` rather than a value): the second try when the first rendering
    does not parse."""
    return _Scanner(text, render_call, this, blank_standalone).run()


class _Scanner:
    def __init__(
        self, text: str, render_call: Renderer, this: str, blank_standalone: bool = False
    ) -> None:
        self.blank_standalone = blank_standalone
        self.text = text
        self.lines = _Lines(text)
        self.render_call = render_call
        self.this = this
        self.stack: list[_Frame] = []
        self.out: list[str] = []
        self.calls: list[DbtCall] = []
        self.config: dict[str, Any] = {}
        self.snapshot: str | None = None
        self.warnings: list[str] = []

    @property
    def rendering(self) -> bool:
        return all(frame.rendered for frame in self.stack)

    @property
    def conditional(self) -> bool:
        return any(frame.conditional for frame in self.stack)

    def run(self) -> JinjaScan:
        position = 0
        while True:
            match = _TAG.search(self.text, position)
            if match is None:
                self._plain(self.text[position:])
                break
            self._plain(self.text[position : match.start()])
            position = self._tag(match)
        for frame in self.stack:
            self.warnings.append(f"line {frame.line}: {{% {frame.kind} %}} block is not closed")
        return JinjaScan(
            rendered="".join(self.out),
            calls=tuple(self.calls),
            config=self.config,
            snapshot=self.snapshot,
            warnings=tuple(self.warnings),
        )

    def _plain(self, chunk: str) -> None:
        self.out.append(chunk if self.rendering else _newlines(chunk))

    def _tag(self, match: re.Match[str]) -> int:
        tag = match.group(0)
        start, end = match.start(), match.end()
        if tag.startswith("{#"):
            self.out.append(_newlines(tag))
            return end
        body = _body(tag)
        body_start = start + 2 + (1 if tag[2:3] in {"-", "+"} else 0)
        if tag.startswith("{%"):
            return self._statement(body, tag, body_start, end)
        self._collect(body, body_start)
        if not self.rendering:
            self.out.append(_newlines(tag))
            return end
        rendered = self._expression(body, start)
        if self.blank_standalone and rendered.startswith(PLACEHOLDER) and self._alone(start, end):
            rendered = ""
        self.out.append(rendered + _newlines(tag))
        return end

    def _alone(self, start: int, end: int) -> bool:
        """True when a tag is the only thing on its line(s)."""
        line_end = self.text.find("\n", end)
        after = self.text[end : line_end if line_end >= 0 else len(self.text)]
        before = self.lines.line_prefix(start).rstrip("{-+ \t")
        return not before.strip() and not after.strip()

    # -- statements {% ... %} --------------------------------------------------------------

    def _statement(self, body: str, tag: str, start: int, end: int) -> int:
        """``start`` is where the tag's body starts."""
        word_match = _WORD.match(body)
        word = word_match.group(1) if word_match else ""
        rest = body[word_match.end() :].strip() if word_match else body
        line = self.lines.line(start)
        if word == "raw":
            closing = _ENDRAW.search(self.text, end)
            stop = closing.start() if closing else len(self.text)
            self.out.append(_newlines(tag))
            self._plain(self.text[end:stop])
            if closing is None:
                self.warnings.append(f"line {line}: {{% raw %}} block is not closed")
                return stop
            self.out.append(_newlines(closing.group(0)))
            return closing.end()
        # The tag's own expressions (`for x in [ref('a')]`, `set r = ref('a')`) are evaluated
        # before the block it opens.
        self._collect(body, start)
        self.out.append(_newlines(tag))
        if word in _CONDITIONAL_BLOCKS:
            chosen = 1 if word == "if" and _FALSE_IN_SINGLE_PASS.match(rest) else 0
            self.stack.append(_Frame(word, _CONDITIONAL_BLOCKS[word], line, chosen=chosen))
        elif word in {"elif", "else"}:
            if self.stack and self.stack[-1].kind in {"if", "for"}:
                self.stack[-1].branch += 1
            else:
                self.warnings.append(f"line {line}: {{% {word} %}} outside of a block")
        elif word == "set" and "=" not in rest.split("|")[0]:
            self.stack.append(_Frame("dropped", "endset", line))
        elif word in _DROPPED_BLOCKS and word != "set":
            self.stack.append(_Frame("dropped", _DROPPED_BLOCKS[word], line))
        elif word in _KEPT_BLOCKS:
            if word == "snapshot":
                self.snapshot = rest.split()[0] if rest.split() else None
            self.stack.append(_Frame("kept", _KEPT_BLOCKS[word], line))
        elif word in _ENDINGS:
            self._close(word, line)
        return end

    def _close(self, word: str, line: int) -> None:
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index].ending == word:
                unclosed = self.stack[index + 1 :]
                for frame in unclosed:
                    self.warnings.append(f"line {frame.line}: {{% {frame.kind} %}} not closed")
                del self.stack[index:]
                return
        self.warnings.append(f"line {line}: {{% {word} %}} without an opening block")

    # -- expressions {{ ... }} -------------------------------------------------------------

    def _expression(self, body: str, start: int) -> str:
        stripped = body.strip()
        if stripped == "this":
            return self.this
        try:
            tree = ast.parse(stripped, mode="eval").body
        except SyntaxError:
            return PLACEHOLDER
        if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name):
            name = tree.func.id
            if name == "config":
                self.config.update(_call_kwargs(tree))
                return ""
            if name in {"ref", "source"}:
                call = _literal_call(name, tree)
                if call is not None:
                    line = self.lines.line(start)
                    return self.render_call(
                        DbtCall(name, call, line, line, self.conditional, False, False)
                    )
        if isinstance(tree, ast.Call):
            return _macro_call(tree)
        return PLACEHOLDER

    def _collect(self, body: str, start: int) -> None:
        """Record every ref()/source() call written inside one tag (body starting at `start`)."""
        prefix = self.lines.line_prefix(start)
        depends_on = bool(_DEPENDS_ON.search(prefix))
        in_comment = bool(_LINE_COMMENT.search(prefix))
        for match in _CALL.finditer(body):
            function = match.group(1)
            parsed = _arguments(body, match.end())
            call_start = start + match.start()
            line = self.lines.line(call_start)
            if parsed is None:
                self.warnings.append(
                    f"line {line}: {function}() with non-literal arguments cannot be resolved"
                )
                continue
            arguments, close = parsed
            needed = 2 if function == "source" else 1
            if not needed <= len(arguments) <= 2:
                self.warnings.append(f"line {line}: {function}() with unexpected arguments")
                continue
            self.calls.append(
                DbtCall(
                    function,
                    tuple(arguments),
                    line,
                    self.lines.line(start + close),
                    self.conditional,
                    depends_on,
                    in_comment,
                )
            )


def _macro_call(call: ast.Call) -> str:
    """A macro call rendered as an opaque function of the columns it is given by name, so
    column lineage flows through it: ``{{ cents_to_dollars('amount') }}`` ->
    ``__dbt_expr__(amount)``. List arguments count for key/hash/concat macros
    (``generate_surrogate_key(['a', 'b'])``); date parts (``'day'``) never count."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in _NOT_MACROS:
        return PLACEHOLDER
    lists = any(word in name.lower() for word in _LIST_MACROS)
    columns: list[str] = []
    for arg in call.args:
        items = arg.elts if isinstance(arg, ast.List | ast.Tuple) and lists else [arg]
        for item in items:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                text = item.value.strip()
                if _COLUMN_ARG.match(text) and text.lower() not in _DATE_PARTS:
                    columns.append(text)
    if not columns:
        return PLACEHOLDER
    return f"{PLACEHOLDER}({', '.join(columns)})"


def _arguments(body: str, position: int) -> tuple[list[str], int] | None:
    """Positional string arguments of a call whose `(` ends at ``position``, and the index of
    its `)`; None when one of them is not a string literal. Keyword arguments (``v=2``,
    ``version=2``) are skipped."""
    found: list[str] = []
    index = position
    while index < len(body):
        rest = body[index:]
        stripped = rest.lstrip()
        if stripped.startswith(")"):
            return found, index + len(rest) - len(stripped)
        keyword = _KEYWORD_ARG.match(rest)
        if keyword:
            close = _skip_value(body, index + keyword.end())
            if close is None:
                return None
            index = close
        else:
            string = _STRING.match(rest)
            if string is None:
                return None
            found.append(string.group(1) if string.group(1) is not None else string.group(2))
            index += string.end()
        if index < len(body) and body[index] == ",":
            index += 1
        elif index < len(body) and body[index] == ")":
            return found, index
        elif index >= len(body) or not body[index].isspace():
            return None
    return None


def _skip_value(body: str, index: int) -> int | None:
    """Index of the `,` or `)` that ends a keyword argument's value."""
    depth = 0
    quote = ""
    while index < len(body):
        char = body[index]
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                return index
            depth -= 1
        elif char == "," and depth == 0:
            return index
        index += 1
    return None


def _literal_call(name: str, call: ast.Call) -> tuple[str, ...] | None:
    args: list[str] = []
    for arg in call.args:
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            return None
        args.append(arg.value)
    if name == "source" and len(args) != 2:
        return None
    if name == "ref" and not 1 <= len(args) <= 2:
        return None
    return tuple(args)


def _call_kwargs(call: ast.Call) -> dict[str, Any]:
    """Keyword arguments of a config() call as plain data (expressions kept as text)."""
    found: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is not None:
            found[keyword.arg] = literal(keyword.value)
    return found


def literal(node: ast.expr) -> Any:
    """A Python/Jinja literal's value; anything else as its source text."""
    if isinstance(node, ast.Name) and node.id in _JINJA_CONSTANTS:
        return _JINJA_CONSTANTS[node.id]
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [literal(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        return {
            str(literal(key)) if key is not None else "**": literal(item)
            for key, item in zip(node.keys, node.values, strict=True)
        }
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.unparse(node)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return ast.unparse(node)


def parse_config(text: str) -> dict[str, Any]:
    """The merged arguments of every ``{{ config(...) }}`` in a dbt SQL file."""
    return scan_jinja(text, lambda call: call.model, PLACEHOLDER).config


def _body(tag: str) -> str:
    body = tag[2:-2]
    if body.startswith(("-", "+")):
        body = body[1:]
    if body.endswith(("-", "+")):
        body = body[:-1]
    return body


def _newlines(text: str) -> str:
    return "\n" * text.count("\n")
