"""Response synthesis modes (LLM-04.2, LLM-04.3, LLM-35.3): `compact` puts every chunk in one
prompt; `tree_summarize` (top_k > 10) answers over groups of chunks that fit the window, then
over the partial answers, level by level, until one answer is left.

Citations survive every level: partial answers keep their `[SourceId: ...]` markers in the text,
`merge_partials` carries evidence, citations, next actions and warnings upward, and
`carry_evidence` makes sure the final answer lists every source a partial answer used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from domain.answering.budget import chunk_tokens, count_tokens
from domain.answering.context import ContextSource

SynthesisMode = Literal["compact", "tree_summarize"]
COMPACT_MAX_TOP_K = 10

# Appended to the system prompt for a level above the leaves.
TREE_LEVEL_RULES = """Additional rules for COMBINING PARTIAL ANSWERS:
- The context holds partial answers, each written from a different group of evidence.
- Combine them into one answer; do not add anything they do not say.
- Keep every [SourceId: ...] citation of the statements you keep.
- List every evidence id the partial answers used."""


def synthesis_mode(top_k: int) -> SynthesisMode:
    """`compact` for top_k <= 10, `tree_summarize` above it."""
    return "compact" if top_k <= COMPACT_MAX_TOP_K else "tree_summarize"


def tree_groups(
    sources: Sequence[ContextSource], max_tokens_per_group: int
) -> list[list[ContextSource]]:
    """Consecutive groups of sources whose evidence blocks fit `max_tokens_per_group` (a source
    larger than that forms a group of its own)."""
    groups: list[list[ContextSource]] = []
    current: list[ContextSource] = []
    used = 0
    for source in sources:
        cost = chunk_tokens(source)
        if current and used + cost > max_tokens_per_group:
            groups.append(current)
            current, used = [], 0
        current.append(source)
        used += cost
    if current:
        groups.append(current)
    return groups


def partial_groups(
    partials: Sequence[Mapping[str, Any]], max_tokens_per_group: int
) -> list[list[Mapping[str, Any]]]:
    """Groups of partial answers for the next level, packed like `tree_groups`."""
    groups: list[list[Mapping[str, Any]]] = []
    current: list[Mapping[str, Any]] = []
    used = 0
    for partial in partials:
        cost = count_tokens(render_partials([partial]))
        if current and used + cost > max_tokens_per_group:
            groups.append(current)
            current, used = [], 0
        current.append(partial)
        used += cost
    if current:
        groups.append(current)
    return groups


def _dedupe(items: Sequence[Any], key: str | None = None) -> list[Any]:
    seen: set[Any] = set()
    out: list[Any] = []
    for item in items:
        ident = item.get(key) if key and isinstance(item, Mapping) else item
        if isinstance(ident, (dict, list)):
            ident = repr(ident)
        if ident in seen:
            continue
        seen.add(ident)
        out.append(item)
    return out


def merge_partials(partials: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One answer-shaped dict from several: answers joined by blank lines (citations kept in
    the text), evidence deduplicated by id, citations by source_id, actions and warnings by
    text, all in order of first appearance."""
    answers = [str(p.get("answer", "")).strip() for p in partials]
    merged: dict[str, Any] = {
        "answer": "\n\n".join(a for a in answers if a),
        "evidence": _dedupe([e for p in partials for e in p.get("evidence", [])], "id"),
        "next_actions": _dedupe([a for p in partials for a in p.get("next_actions", [])]),
        "warnings": _dedupe([w for p in partials for w in p.get("warnings", [])]),
    }
    citations = [c for p in partials for c in p.get("citations", [])]
    if citations:
        merged["citations"] = _dedupe(citations, "source_id")
    return merged


def carry_evidence(
    final: Mapping[str, Any], partials: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The final answer with every evidence item and citation of the partial answers it was
    built from appended (the final answer's own come first)."""
    below = merge_partials(partials)
    result = dict(final)
    result["evidence"] = _dedupe([*final.get("evidence", []), *below["evidence"]], "id")
    result["warnings"] = _dedupe([*final.get("warnings", []), *below["warnings"]])
    if "citations" in final or "citations" in below:
        result["citations"] = _dedupe(
            [*final.get("citations", []), *below.get("citations", [])], "source_id"
        )
    return result


def render_partials(partials: Sequence[Mapping[str, Any]]) -> str:
    """Partial answers as the context of the next level, each with its evidence ids."""
    blocks = []
    for number, partial in enumerate(partials, start=1):
        ids = [str(e.get("id")) for e in partial.get("evidence", []) if isinstance(e, Mapping)]
        blocks.append(
            f"[Partial {number}]\n{str(partial.get('answer', '')).strip()}\n"
            f"Evidence: {', '.join(ids) if ids else '(none)'}"
        )
    return "## Partial Answers\n" + "\n\n".join(blocks)
