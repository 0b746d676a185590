"""Hybrid confidence (rag-service.md, "Confidence Scoring"), the CITE/ROUTE decision and the
route target when confidence is low ("Tag Owner Lookup").

overall = retrieval_score * 30 + coverage_score * 40 + llm_score / 100 * 30, clamped to 0..100.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from domain.answering.citations import CITATION_PATTERN
from domain.answering.entities import STOPWORDS
from domain.llm import strip_reasoning


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


RETRIEVAL_WEIGHT = 30
COVERAGE_WEIGHT = 40
LLM_WEIGHT = 30
# Used when there is no LLM self-rating (the confidence prompt failed, or the provider is the
# extractive digest): the midpoint, so the missing signal neither lifts nor sinks the score.
NEUTRAL_LLM_SCORE = 50
CONFIDENCE_THRESHOLD = 60  # RAG_CONFIDENCE_THRESHOLD: below it the action is ROUTE

Action = Literal["CITE", "ROUTE"]


@dataclass(frozen=True, slots=True)
class ConfidenceScore:
    """The score and its parts. `llm_score_assumed` is True when `llm_score` is the neutral
    value because no self-rating was available; `penalty` is the grounding penalty applied."""

    overall: int
    retrieval_score: float
    coverage_score: float
    llm_score: int
    llm_score_assumed: bool = False
    penalty: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def penalized(self, penalty: float) -> ConfidenceScore:
        """The score after a grounding penalty (0..1): overall * (1 - penalty)."""
        penalty = min(1.0, max(0.0, penalty))
        overall = _clamp(round(self.overall * (1 - penalty)))
        return replace(self, overall=overall, penalty=round(self.penalty + penalty, 4))


_CITATION_RE = re.compile(CITATION_PATTERN)
_URN = re.compile(r"urn:li:[^\s\],;`'\"()]+")
_IDENTIFIER = re.compile(
    r"[A-Za-z_][\w$]*(?:\.[A-Za-z_][\w$]*)+"  # schema.table
    r"|[A-Za-z0-9]*_[\w]*[A-Za-z0-9]"  # snake_case
    r"|[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+"  # CamelCase
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]*")
# Words of answers that say nothing about the evidence.
_ANSWER_FILLER = _words(
    """
    answer answers based context provided evidence information available following shown
    according cited cite citation citations question relevant snippet snippets summary
    therefore thus because although including include includes contains contain"""
)


def key_phrases(text: str) -> list[str]:
    """Significant terms of an answer, lower-cased and deduplicated: URNs, identifiers
    (schema.table, snake_case, CamelCase), then words of 4+ letters that are not stopwords.
    SourceId markers are removed first, so citing does not count as coverage."""
    text = _CITATION_RE.sub(" ", text)
    phrases: list[str] = []
    seen: set[str] = set()

    def add(term: str) -> None:
        key = term.lower().strip("'-.")
        if key and key not in seen:
            seen.add(key)
            phrases.append(key)

    for urn in _URN.findall(text):
        add(urn)
    text = _URN.sub(" ", text)
    for ident in _IDENTIFIER.findall(text):
        add(ident)
    for word in _WORD.findall(_IDENTIFIER.sub(" ", text)):
        lower = word.lower()
        if len(lower) >= 4 and lower not in STOPWORDS and lower not in _ANSWER_FILLER:
            add(lower)
    return phrases


def coverage(answer: str, context: str) -> float:
    """Share of the answer's key phrases found in the context (0.0 when it has none)."""
    phrases = key_phrases(answer)
    if not phrases:
        return 0.0
    haystack = context.lower()
    return sum(1 for phrase in phrases if phrase in haystack) / len(phrases)


def retrieval_score(scores: Sequence[float]) -> float:
    """Average similarity of the chunks used, each clamped to 0..1 (0.0 without chunks)."""
    if not scores:
        return 0.0
    return sum(min(1.0, max(0.0, s)) for s in scores) / len(scores)


def hybrid_confidence(
    scores: Sequence[float], answer: str, context: str, llm_score: int | None
) -> ConfidenceScore:
    """30% retrieval, 40% coverage, 30% LLM self-rating (NEUTRAL_LLM_SCORE when None)."""
    retrieval = retrieval_score(scores)
    covered = coverage(answer, context)
    assumed = llm_score is None
    llm = NEUTRAL_LLM_SCORE if llm_score is None else min(100, max(0, llm_score))
    overall = int(retrieval * RETRIEVAL_WEIGHT + covered * COVERAGE_WEIGHT + llm / 100 * LLM_WEIGHT)
    return ConfidenceScore(
        overall=_clamp(overall),
        retrieval_score=round(retrieval, 4),
        coverage_score=round(covered, 4),
        llm_score=llm,
        llm_score_assumed=assumed,
    )


def _clamp(value: int) -> int:
    return min(100, max(0, value))


_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:\.\d+)?)(?![\w])")


def parse_llm_score(text: str) -> int | None:
    """The 0..100 rating in a reply to the confidence prompt ("85", "Score: 85/100", "85%");
    a decimal in (0, 1] is read as a fraction ("0.85" -> 85). None when there is no number."""
    body, _ = strip_reasoning(text)
    for match in _NUMBER.finditer(body):
        raw = match.group(1)
        value = float(raw)
        if "." in raw and 0 < value <= 1:
            return round(value * 100)
        if 0 <= value <= 100:
            return int(value)
    return None


def action_for(overall: int, threshold: int = CONFIDENCE_THRESHOLD) -> Action:
    """CITE at or above the threshold, ROUTE below it."""
    return "CITE" if overall >= threshold else "ROUTE"


@dataclass(frozen=True, slots=True)
class RouteTarget:
    """Who should answer instead when confidence is low (rag-service.md `RouteTarget`)."""

    tag: str
    owner_user_id: str | None
    owner_email: str | None
    reason: str
    fallback: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


ADMIN_TAG = "system"
OwnerLookup = Callable[[str], tuple[str, str | None] | None]


def primary_tag(source_tags: Sequence[Sequence[str]]) -> str | None:
    """The most common tag of the retrieved sources (the first seen wins a tie)."""
    counts: dict[str, int] = {}
    for tags in source_tags:
        for tag in tags:
            counts[tag] = counts.get(tag, 0) + 1
    return max(counts, key=lambda t: counts[t]) if counts else None


def route_target(
    source_tags: Sequence[Sequence[str]],
    owner_of: OwnerLookup,
    admin_email: str,
    overall: int,
) -> RouteTarget:
    """Route to the owner of the context's most common tag, else to the admin.

    `owner_of(tag)` returns `(owner_user_id, owner_email)` from the tags/users read model, or
    None when the tag has no owner; an owner without an email is a user that was not found.
    """
    tag = primary_tag(source_tags)
    if tag is None:
        return admin_fallback("No tags in context", admin_email)
    owner = owner_of(tag)
    if owner is None or not owner[0]:
        return admin_fallback(f"No owner for tag '{tag}'", admin_email)
    user_id, email = owner
    if not email:
        return admin_fallback(f"Owner user not found for tag '{tag}'", admin_email)
    return RouteTarget(
        tag=tag,
        owner_user_id=user_id,
        owner_email=email,
        reason=f"Low confidence: {overall}%, routing to {tag} owner",
        fallback=False,
    )


def admin_fallback(reason: str, admin_email: str) -> RouteTarget:
    """The admin as the route target, with the reason nobody better was found."""
    return RouteTarget(
        tag=ADMIN_TAG,
        owner_user_id=None,
        owner_email=admin_email,
        reason=f"{reason} - routing to admin",
        fallback=True,
    )
