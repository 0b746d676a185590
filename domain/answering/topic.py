"""A stateless conversation topic for follow-up questions (rag-providers.md, PRV-03.1-03.4).

The first message of a conversation is embedded as it is. The answer returns a topic (the
question's content words); the client sends it back with its next question, and the follow-up
is embedded as the accumulated topic, so "does it also feed the finance mart?" still carries the
entity the conversation is about. Identifiers are kept longest when the topic grows too long.
"""

from __future__ import annotations

import re
from typing import Literal

from domain.answering.entities import entity_candidates, is_entity_like


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


Strategy = Literal["raw_first_message", "accumulated_topic"]
RAW_FIRST_MESSAGE: Strategy = "raw_first_message"
ACCUMULATED_TOPIC: Strategy = "accumulated_topic"
# The spec's log wording for each strategy.
STRATEGY_LOG: dict[str, str] = {
    RAW_FIRST_MESSAGE: "first message (raw query)",
    ACCUMULATED_TOPIC: "follow-up (contextualized topic)",
}
MAX_TOPIC_CHARS = 500

# Words that carry no topic: function words and pronouns (the pronoun's subject is what the
# accumulated topic already holds). Lineage words ("upstream", "feeds") are kept: they matter.
_FILLER: frozenset[str] = _words(
    """
    a about also am an and any are as at be been being but by can could did do does doing for
    from had has have he her here him his how i if in into is it its itself just let me might
    more my no not now of on or our please she should so some than that the their them then
    there these they this those to too us very was we were what when where which while who whom
    whose why will with would you your yes ok okay thanks thank tell show give
    """
)
_TERM = re.compile(r"[A-Za-z0-9_$][\w$.\-]*[\w$]|[A-Za-z0-9]")


def retrieval_text(question: str, topic: str | None) -> tuple[str, Strategy]:
    """What to embed for retrieval, and the strategy used (PRV-03.4).

    A missing or whitespace-only topic means a first message: the raw question is embedded.
    Otherwise the accumulated topic (the previous topic plus this question) is embedded.
    """
    if topic is None or not topic.strip():
        return question.strip(), RAW_FIRST_MESSAGE
    return accumulate_topic(topic, question), ACCUMULATED_TOPIC


def accumulate_topic(topic: str | None, question: str, max_chars: int = MAX_TOPIC_CHARS) -> str:
    """The topic after this question: earlier terms first, then the question's new content
    words; over `max_chars`, the oldest plain words go first and identifiers last."""
    entities = {e.lower() for e in entity_candidates(question, include_plain_words=False)}
    if topic:
        entities |= {e.lower() for e in entity_candidates(topic, include_plain_words=False)}
    terms: list[str] = []
    seen: set[str] = set()
    for term in [*topic_terms(topic or ""), *topic_terms(question)]:
        if term.lower() not in seen:
            seen.add(term.lower())
            terms.append(term)

    def keeps(term: str) -> bool:
        return term.lower() in entities or is_entity_like(term)

    while terms and len(" ".join(terms)) > max_chars:
        plain = next((i for i, t in enumerate(terms) if not keeps(t)), 0)
        del terms[plain]
    return " ".join(terms)


def topic_terms(text: str) -> list[str]:
    """The content words of a text, in order (filler words and pronouns removed)."""
    return [t for t in _TERM.findall(text) if t.lower() not in _FILLER]
