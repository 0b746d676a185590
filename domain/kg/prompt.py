"""The prompt that asks a model for lineage edges of one file (llm-service.md "Predict lineage
method": a structured prompt with the code and its context nodes, JSON only)."""

from __future__ import annotations

from collections.abc import Sequence

from domain.graph import FileLineage, LineageNode, NodeKind, Rel
from domain.kg.proposals import DEFAULT_MAX_PROPOSALS, proposals_schema
from domain.llm import ChatMessage, CompletionRequest

DEFAULT_MAX_CODE_CHARS = 6000
MAX_CONTEXT_NODES = 40
_CONTEXT_KINDS = frozenset(NodeKind) - {NodeKind.COLUMN, NodeKind.CTE}
_WORDS = {Rel.READS_FROM: "READS", Rel.WRITES_TO: "WRITES"}

SYSTEM_PROMPT = (
    "You find data lineage in source code. Answer with one JSON object and nothing else: "
    '{"proposals": [{"source_node": "...", "target_node": "...", "relationship_type": '
    '"READS" or "WRITES", "confidence": 0.0 to 1.0, "reasoning": "..."}]}. '
    '"A READS B" means the code of A reads data from B; "A WRITES B" means A writes data into B. '
    "Name tables, models, functions and files exactly as the code or the known nodes name them. "
    "Propose only relations the code shows, with a low confidence for guesses. "
    'An empty list {"proposals": []} is a good answer when there is nothing to add. '
    'Example: for "INSERT INTO sales.daily SELECT * FROM raw.sales" the answer is '
    '{"proposals": [{"source_node": "sales.daily", "target_node": "raw.sales", '
    '"relationship_type": "READS", "confidence": 0.9, "reasoning": "it selects from raw.sales"}]}.'
)


def proposal_request(
    path: str,
    code: str,
    lineage: FileLineage,
    neighbours: Sequence[LineageNode] = (),
    *,
    max_code_chars: int = DEFAULT_MAX_CODE_CHARS,
    max_proposals: int = DEFAULT_MAX_PROPOSALS,
) -> CompletionRequest:
    """A strict-JSON completion request for one file's lineage proposals."""
    shown = code if len(code) <= max_code_chars else code[:max_code_chars] + "\n-- (truncated)"
    parts = [f"File: {path}"]
    nodes = context_nodes(lineage, neighbours)
    if nodes:
        parts.append("Known nodes:\n" + "\n".join(f"- {n.name} ({n.kind})" for n in nodes))
    found = parser_relations(lineage)
    if found:
        parts.append("Edges the parser already found:\n" + "\n".join(f"- {r}" for r in found))
    parts.append(f"Code:\n```\n{shown}\n```")
    parts.append(
        f"Propose at most {max_proposals} lineage edges of this file, above all the ones the "
        "parser missed."
    )
    return CompletionRequest(
        messages=(ChatMessage("system", SYSTEM_PROMPT), ChatMessage("user", "\n\n".join(parts))),
        max_tokens=1024,
        temperature=0.1,
        response_format=proposals_schema(max_proposals),
    )


def context_nodes(lineage: FileLineage, neighbours: Sequence[LineageNode]) -> list[LineageNode]:
    """The file's own nodes first, then its neighbours; no columns or CTEs, no repeats."""
    seen: set[str] = set()
    chosen: list[LineageNode] = []
    for node in (*lineage.nodes, *neighbours):
        if node.kind in _CONTEXT_KINDS and node.urn not in seen:
            seen.add(node.urn)
            chosen.append(node)
    return chosen[:MAX_CONTEXT_NODES]


def parser_relations(lineage: FileLineage) -> list[str]:
    """`A READS B` / `A WRITES B` for the parser's dataset-level edges of the file."""
    names = {n.urn: n.name for n in lineage.nodes}
    lines = {
        f"{names.get(e.source, e.source)} {_WORDS[e.rel]} {names.get(e.target, e.target)}"
        for e in lineage.edges
        if e.rel in _WORDS
    }
    return sorted(lines)
