"""Entity mentions in a question: the names a graph lookup starts from (deep and graph intents).

Strong candidates come first, in the order they appear: `backticked` or "quoted" names, dotted
`schema.table` (and its last part), snake_case, CamelCase, and words next to table/view/model.
Then, unless asked not to, every other word that is not a stopword, so one batched graph lookup
(`IN [...]`) can try them all. Casing is left alone: the graph store matches case-insensitively
(LLM-31.2).
"""

from __future__ import annotations

import re
from collections.abc import Iterable


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Function words, question words and the vocabulary of lineage questions: never entity names.
STOPWORDS: frozenset[str] = _words(
    """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can cannot could did do does doing done down during each
    either else even ever every few for from further get gets give go had has have having he her
    here hers him his how however i if in into is it its itself just let lets like many may me
    might more most much must my no nor not now of off on once one only or other our ours out
    over own please same shall she should show so some such tell than that the their theirs them
    then there these they this those through to too under until up upon us very via was we were
    what whatever when where whether which while who whom whose why will with within without
    would yes yet you your yours

    list find explain describe give shows tells see look happens happen change changes changed
    changing compute computed computes calculate calculated used uses use using make makes made

    upstream downstream lineage depend depends dependent dependents dependency dependencies
    feed feeds fed feeding read reads reading write writes writing derive derives derived
    source sources sourced built build builds impact impacts impacted break breaks broken
    consumer consumers consume consumes parent parents child children path paths edge edges
    node nodes table tables view views model models column columns dataset datasets field fields
    file files function functions procedure procedures job jobs mart marts seed seeds schema
    schemas query queries data pipeline pipelines code repo repository project graph
    """
)

_KIND_NOUNS = (
    "table|view|model|source|seed|column|dataset|mart|function|procedure|job|cte|file|snapshot"
)
_NAME = r"[A-Za-z_][\w$]*(?:\.[A-Za-z_][\w$]*)*"
_BACKTICK = re.compile(r"`([^`\n]{1,200})`")
_QUOTED = re.compile(r"\"([^\"\n]{1,80})\"|(?<![A-Za-z])'([^'\n]{1,80})'(?![A-Za-z])")
_DOTTED = re.compile(r"(?<![\w.])([A-Za-z_][\w$]*(?:\.[A-Za-z_][\w$]*)+)(?![\w])")
_SNAKE = re.compile(r"(?<![\w.])([A-Za-z0-9]*_[\w]*[A-Za-z0-9][\w]*)(?![\w.])")
_CAMEL = re.compile(r"(?<![\w.])([A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+|[a-z]+[A-Z][A-Za-z0-9]*)\b")
_AFTER_KIND = re.compile(rf"\b(?:{_KIND_NOUNS})s?\s+`?({_NAME})", re.IGNORECASE)
_BEFORE_KIND = re.compile(rf"\b({_NAME})`?\s+(?:{_KIND_NOUNS})s?\b", re.IGNORECASE)
_WORD = re.compile(r"(?<![\w.])([A-Za-z][\w$]*)(?![\w])")


def entity_candidates(question: str, *, include_plain_words: bool = True) -> list[str]:
    """Names the question may refer to, strongest first, deduplicated case-insensitively."""
    found: list[tuple[int, int, str]] = []  # (rank, position, name)
    for match in _BACKTICK.finditer(question):
        found.append((0, match.start(), match.group(1).strip()))
    for match in _QUOTED.finditer(question):
        found.append((0, match.start(), (match.group(1) or match.group(2) or "").strip()))
    for match in _DOTTED.finditer(question):
        name = match.group(1)
        found.append((1, match.start(), name))
        found.append((1, match.start() + 1, name.rsplit(".", 1)[1]))
    for pattern in (_SNAKE, _CAMEL, _AFTER_KIND, _BEFORE_KIND):
        for match in pattern.finditer(question):
            found.append((1, match.start(1), match.group(1)))
    strong = _dedupe(name for _, _, name in sorted(found, key=lambda f: (f[0], f[1])))
    if not include_plain_words:
        return strong
    plain = (m.group(1) for m in _WORD.finditer(question) if len(m.group(1)) >= 3)
    return _dedupe([*strong, *plain])


def is_entity_like(word: str) -> bool:
    """A word that looks like an identifier: dotted, snake_case or CamelCase."""
    return bool(
        _DOTTED.fullmatch(word) or _SNAKE.fullmatch(word) or _CAMEL.fullmatch(word)
    ) and not is_stopword(word)


def is_stopword(word: str) -> bool:
    return word.lower() in STOPWORDS


def _dedupe(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for raw in names:
        name = raw.strip(" \t.,;:?!()[]{}")
        key = name.lower()
        if not name or key in seen or is_stopword(name) or name.isdigit():
            continue
        seen.add(key)
        out.append(name)
    return out
