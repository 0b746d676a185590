"""Checking an answer against its evidence before it is returned (beyond the spec).

Two checks: every id the answer cites must have been in the context (`map_citations`), and
every lineage edge the answer asserts must exist in the graph read model. Claims are read from
the text in the graph's direction convention (domain/graph.py): `(T)-[READS_FROM]->(S)` when T
reads from S, so "b feeds a", "a depends on b", "a is built from b" and "b is upstream of a" all
become `(a, READS_FROM, b)`; "p writes to t" becomes `(p, WRITES_TO, t)`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from domain.answering.citations import CITATION_PATTERN, CitationResult, map_citations
from domain.answering.context import ContextSource
from domain.answering.entities import is_stopword

Edge = tuple[str, str, str]  # (source of the edge, REL, target): downstream first for READS_FROM

_NAME = (
    r"(?:\[\s*urn:li:[^\s\]]+\s*\]"  # [urn:li:...]
    r"|urn:li:[^\s\],;`'\"()]+"  # urn:li:...
    r"|`[^`\n]+`"  # `name`
    r"|[A-Za-z_][\w$]*(?:\.[A-Za-z_][\w$]*)*)"  # name, schema.table
)
_KIND = r"(?:\s+\((?:[A-Za-z_ ]+)\))?"  # "orders (Table)"
_KIND_NOUN = r"(?:\s+(?:table|view|model|dataset|source|seed|mart|cte|procedure|function|job))?"
_OBJ_PREFIX = r"(?:(?:the|a|an|table|view|model|dataset|source|seed|dbt)\s+)*"
_LIST = rf"{_NAME}(?:\s*(?:,\s*(?:and\s+)?|\s+and\s+){_OBJ_PREFIX}{_NAME})*"
_ADV = r"(?:(?:directly|also|only|indirectly|still|mainly|primarily)\s+)?"

# A subject starts at a word boundary: without it every character of a word is tried as the
# start of a name, and long answers cost milliseconds.
_START = r"(?<![\w$.`\[:-])"
_ARROW = re.compile(rf"{_START}({_NAME}){_KIND}\s*-\[:?([A-Z_]+)\]->\s*({_NAME})")
_PATH = re.compile(rf"{_START}({_NAME}){_KIND}\s*->\s*([A-Z_]+)\s*->\s*({_NAME})")

# (pattern, rel, reversed): reversed=True means the grammatical subject is the edge's target.
_PHRASES: tuple[tuple[re.Pattern[str], str, bool], ...] = tuple(
    (re.compile(_START + pattern, re.IGNORECASE), rel, flipped)
    for pattern, rel, flipped in (
        (
            rf"({_NAME}){_KIND_NOUN}\s+{_ADV}(?:reads|read|selects|pulls|queries)\s+"
            rf"(?:data\s+|rows\s+)?from\s+{_OBJ_PREFIX}({_LIST})",
            "READS_FROM",
            False,
        ),
        (
            rf"({_NAME}){_KIND_NOUN}\s+(?:is|are)\s+{_ADV}(?:built|derived|sourced|computed|"
            rf"created|populated|generated|calculated)\s+from\s+{_OBJ_PREFIX}({_LIST})",
            "READS_FROM",
            False,
        ),
        (
            rf"({_NAME}){_KIND_NOUN}\s+{_ADV}(?:depends|depend)\s+on\s+{_OBJ_PREFIX}({_LIST})",
            "READS_FROM",
            False,
        ),
        (
            rf"({_NAME}){_KIND_NOUN}\s+(?:is|are)\s+{_ADV}downstream\s+of\s+{_OBJ_PREFIX}"
            rf"({_LIST})",
            "READS_FROM",
            False,
        ),
        (
            rf"({_NAME}){_KIND_NOUN}\s+{_ADV}(?:feeds|feed)\s+(?:into\s+)?{_OBJ_PREFIX}({_LIST})",
            "READS_FROM",
            True,
        ),
        (
            rf"({_NAME}){_KIND_NOUN}\s+(?:is|are)\s+{_ADV}upstream\s+of\s+{_OBJ_PREFIX}"
            rf"({_LIST})",
            "READS_FROM",
            True,
        ),
        (
            rf"({_NAME}){_KIND_NOUN}\s+{_ADV}(?:writes|write|inserts|insert|loads|load)\s+"
            rf"(?:data\s+|rows\s+)?(?:to|into)\s+{_OBJ_PREFIX}({_LIST})",
            "WRITES_TO",
            False,
        ),
    )
)
_NAME_RE = re.compile(_NAME)
_CITATION_RE = re.compile(CITATION_PATTERN)
_GENERIC = frozenset(
    {"which", "what", "that", "this", "it", "they", "these", "those", "none", "nothing", "and"}
)


def asserted_edges(answer: str) -> list[Edge]:
    """The lineage edges an answer claims, as (source, REL, target) in graph direction,
    deduplicated in order. Pronouns and generic nouns ("it", "the view") are not claims."""
    text = _CITATION_RE.sub(" ", answer)
    edges: list[Edge] = []
    for pattern in (_ARROW, _PATH):
        for match in pattern.finditer(text):
            _add(edges, match.group(1), match.group(2), match.group(3))
    for pattern, rel, flipped in _PHRASES:
        for match in pattern.finditer(text):
            subject = match.group(1)
            for obj in _NAME_RE.findall(match.group(2)):
                if _clean(obj).lower() in {"the", "a", "an", "and"}:
                    continue
                if flipped:
                    _add(edges, obj, rel, subject)
                else:
                    _add(edges, subject, rel, obj)
    return edges


def _clean(name: str) -> str:
    return name.strip().strip("`[]").strip()


def _add(edges: list[Edge], source: str, rel: str, target: str) -> None:
    source, target = _clean(source), _clean(target)
    for name in (source, target):
        if not name or name.lower() in _GENERIC or is_stopword(name):
            return
    if source.lower() == target.lower():
        return
    edge = (source, rel.upper(), target)
    if edge not in edges:
        edges.append(edge)


@dataclass(slots=True)
class GroundingReport:
    """What the checks found. `penalty` (0..1) scales confidence down: overall * (1 - penalty)."""

    grounded: bool
    penalty: float
    warnings: list[str] = field(default_factory=list)
    citations: CitationResult = field(default_factory=CitationResult)
    checked_edges: list[Edge] = field(default_factory=list)
    unsupported_edges: list[Edge] = field(default_factory=list)

    @property
    def supported_edges(self) -> list[Edge]:
        return [e for e in self.checked_edges if e not in self.unsupported_edges]


# Half the confidence goes when every asserted edge is unsupported, or every cited id unknown.
EDGE_PENALTY_WEIGHT = 0.5
ID_PENALTY_WEIGHT = 0.5


def check_grounding(
    answer: str,
    evidence_ids: Sequence[str],
    sources: Sequence[ContextSource],
    edge_exists: Callable[[str, str], bool],
    *,
    graph_ids: Collection[str] = (),
) -> GroundingReport:
    """Check cited ids against the context and asserted edges against the graph.

    `edge_exists(source, target)` answers whether the lineage graph holds an edge (any lineage
    relationship) from `source` to `target`, each given as the answer wrote it (a name or a
    URN); for READS_FROM claims the source is the downstream node.
    """
    citations = map_citations(answer, evidence_ids, sources, graph_ids=graph_ids)
    edges = asserted_edges(answer)
    unsupported = [e for e in edges if not edge_exists(e[0], e[2])]
    warnings = list(citations.warnings)
    warnings += [
        f"Unsupported claim: '{s} {rel} {t}' is not an edge of the lineage graph."
        for s, rel, t in unsupported
    ]
    mentioned = len(citations.citations) + len(citations.graph_ids) + len(citations.unknown)
    edge_share = len(unsupported) / len(edges) if edges else 0.0
    id_share = len(citations.unknown) / mentioned if mentioned else 0.0
    penalty = 1 - (1 - EDGE_PENALTY_WEIGHT * edge_share) * (1 - ID_PENALTY_WEIGHT * id_share)
    has_support = bool(citations.citations or citations.graph_ids or len(edges) > len(unsupported))
    return GroundingReport(
        grounded=has_support and not unsupported and not citations.unknown,
        penalty=round(penalty, 4),
        warnings=warnings,
        citations=citations,
        checked_edges=edges,
        unsupported_edges=unsupported,
    )
