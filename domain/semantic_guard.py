"""The semantic cache's polarity and entity guard.

Embeddings put "which models read stg_orders" and "which models do not read stg_orders" close
together (often above 0.95 cosine), and "what feeds orders" next to "what feeds customers". A
semantic cache hit is therefore only allowed when the two questions

- carry the same negations ("not", "no", "never", "without", "except", "none", "nor",
  "neither", "excluding", and "n't" contractions), counted;
- name the same identifiers: words with `_`, `.`, `#`, `/`, `:`, `-` or digits, camelCase or
  upper-case words, capitalised words inside the sentence, quoted or back-ticked names, numbers;
- and, when the caller can tell entity names apart (`is_entity`, e.g. a graph lookup), do not
  differ by a word that names an entity.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

NEGATIONS = frozenset(
    {"not", "no", "never", "without", "except", "none", "nor", "neither", "excluding"}
)
_QUOTED = re.compile(
    r"`([^`]+)`"  # `back-ticked`
    r"|\"([^\"]+)\""  # "double-quoted"
    r"|(?<!\w)'([^'\s][^']*[^'\s])'(?!\w)"  # 'single-quoted', not an apostrophe
    r"|\u201c([^\u201d]+)\u201d"  # typographic quotes
)
_CONTRACTION = re.compile(r"(?i)\b(\w+)n[\u2019']t\b")
_TOKEN = re.compile(r"[\w][\w.#/:\-]*")
_IDENTIFIER_MARK = re.compile(r"[_.#/:\-\d]")
_STOPWORD_TEXT = (
    "a an the of in on to from for into onto by with at as and or is are was were be been do "
    "does did what which where who whom whose how why when that this these those it its me my "
    "we our you your i show list tell give find please can could would should will there their "
    "them they all any some each every about than then so if also"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())

IsEntity = Callable[[list[str]], Iterable[str]]


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """Whether a cached answer to another question may answer this one, and why not."""

    allowed: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class _Parsed:
    negations: Counter[str]
    identifiers: frozenset[str]
    words: frozenset[str]


def may_reuse_answer(
    question: str, cached_question: str, is_entity: IsEntity | None = None
) -> GuardVerdict:
    """Allow a semantic hit only if the questions agree in polarity and in what they name."""
    new, old = _parse(question), _parse(cached_question)
    if new.negations != old.negations:
        differing = sorted((new.negations - old.negations) + (old.negations - new.negations))
        return GuardVerdict(False, f"negation differs ({', '.join(differing)})")
    if new.identifiers != old.identifiers:
        differing = sorted(new.identifiers ^ old.identifiers)
        return GuardVerdict(False, f"names differ ({', '.join(differing)})")
    if is_entity is not None:
        differing_words = sorted((new.words ^ old.words) - _STOPWORDS - NEGATIONS)
        named = sorted(set(is_entity(differing_words))) if differing_words else []
        if named:
            return GuardVerdict(False, f"entities differ ({', '.join(named)})")
    return GuardVerdict(True)


def _parse(question: str) -> _Parsed:
    text = _CONTRACTION.sub(lambda m: _uncontract(m.group(1)), question)
    identifiers = {next(g for g in m.groups() if g).strip().lower() for m in _QUOTED.finditer(text)}
    tokens = [t.rstrip(".:-/#") for t in _TOKEN.findall(_QUOTED.sub(" ", text))]
    tokens = [t for t in tokens if t]
    negations: Counter[str] = Counter()
    words: set[str] = set()
    for position, token in enumerate(tokens):
        lower = token.lower()
        if lower == "cannot":
            negations["not"] += 1
            continue
        if lower in NEGATIONS:
            negations[lower] += 1
            continue
        if _is_identifier(token, first=position == 0):
            identifiers.add(lower)
        else:
            words.add(lower)
    return _Parsed(negations, frozenset(identifiers), frozenset(words))


def _uncontract(stem: str) -> str:
    """Contractions: doesn't -> does not, can't -> can not, won't -> will not."""
    lower = stem.lower()
    base = {"wo": "will", "ca": "can", "sha": "shall"}.get(lower, stem)
    return f"{base} not"


def _is_identifier(token: str, first: bool) -> bool:
    if _IDENTIFIER_MARK.search(token):
        return True
    upper_inside = any(c.isupper() for c in token[1:])
    if upper_inside:  # camelCase, PascalCase with a second capital, ALLCAPS
        return True
    return token[0].isupper() and not first and len(token) > 1
