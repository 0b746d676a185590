"""The five chat intents and what each one retrieves (llm-service.md, "CQRS routing table").

| intent   | retrieval                                             | timeout |
|----------|-------------------------------------------------------|---------|
| deep     | top 10 vector chunks + 2-hop graph from the question  | 90 s    |
| graph    | up to 3 hops of graph (authoritative) + top 3 chunks  | 45 s    |
| semantic | top 5 vector chunks, no graph                         | 45 s    |
| text     | nothing                                               | 30 s    |
| title    | nothing                                               | 30 s    |
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Intent(StrEnum):
    """A chat endpoint: `/api/chat/{intent}`."""

    DEEP = "deep"
    GRAPH = "graph"
    SEMANTIC = "semantic"
    TEXT = "text"
    TITLE = "title"


def usage_type(intent: Intent | str) -> str:
    """The model-configuration usage type whose fallback chain answers this intent."""
    return f"chat_{Intent(intent).value}"


def endpoint(intent: Intent | str) -> str:
    """The HTTP path of the intent, as the spec names it in errors and metrics."""
    return f"/api/chat/{Intent(intent).value}"


@dataclass(frozen=True, slots=True)
class IntentProfile:
    """How one intent retrieves and how long its model may take.

    `top_k` is the number of vector chunks in the prompt (for graph: supporting chunks);
    `graph_hops` the traversal depth from the entities named in the question.
    """

    intent: Intent
    top_k: int
    graph_hops: int
    uses_vectors: bool
    uses_graph: bool
    graph_authoritative: bool
    timeout_s: float

    @property
    def retrieves(self) -> bool:
        return self.uses_vectors or self.uses_graph


_PROFILES: dict[Intent, IntentProfile] = {
    Intent.DEEP: IntentProfile(Intent.DEEP, 10, 2, True, True, False, 90.0),
    Intent.GRAPH: IntentProfile(Intent.GRAPH, 3, 3, True, True, True, 45.0),
    Intent.SEMANTIC: IntentProfile(Intent.SEMANTIC, 5, 0, True, False, False, 45.0),
    Intent.TEXT: IntentProfile(Intent.TEXT, 0, 0, False, False, False, 30.0),
    Intent.TITLE: IntentProfile(Intent.TITLE, 0, 0, False, False, False, 30.0),
}


def profile(intent: Intent | str) -> IntentProfile:
    """The retrieval profile of an intent (raises ValueError for an unknown one)."""
    return _PROFILES[Intent(intent)]


# Words that make a question a lineage question: the semantic endpoint warns that it has no
# graph evidence for them and recommends /api/chat/deep or /api/chat/graph.
LINEAGE_KEYWORDS: tuple[str, ...] = (
    "upstream",
    "downstream",
    "depends",
    "depend",
    "dependent",
    "dependents",
    "dependency",
    "dependencies",
    "lineage",
    "feeds",
    "feed",
    "fed",
    "feeding",
    "reads from",
    "writes to",
    "derived",
    "derives",
    "derive",
    "sourced from",
    "built from",
    "impact",
    "impacted",
    "impacts",
    "break",
    "breaks",
    "consumers",
    "consumes",
    "parents",
    "children",
)

_LINEAGE_RE = re.compile(
    r"\b(?:" + "|".join(re.escape(k).replace(r"\ ", r"\s+") for k in LINEAGE_KEYWORDS) + r")\b",
    re.IGNORECASE,
)

SEMANTIC_LINEAGE_WARNING = (
    "This looks like a lineage question, but the semantic endpoint uses no graph evidence; "
    "ask /api/chat/deep or /api/chat/graph for upstream/downstream paths."
)
SEMANTIC_LINEAGE_NEXT_ACTION = (
    "Ask /api/chat/graph (or /api/chat/deep) for the lineage paths behind this answer."
)


def mentions_lineage(question: str) -> bool:
    """True when the question uses a lineage word (upstream, downstream, depends, feeds...)."""
    return _LINEAGE_RE.search(question) is not None


def lineage_keywords_in(question: str) -> list[str]:
    """The lineage words the question uses, lower-cased, in order (for logs and warnings)."""
    return [re.sub(r"\s+", " ", m.group(0).lower()) for m in _LINEAGE_RE.finditer(question)]
