"""From a proposal's names to an edge between URNs of the graph.

A name resolves to a known node (the file's own nodes, then its neighbours in the graph) when
it matches its name, short name or URN; a name no node has is accepted only when the file's
code mentions it, as a new dataset. Anything else is dropped ("unknown_node"): a model may not
invent the graph's vocabulary.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from domain.graph import DATASET_KINDS, LineageEdge, LineageNode, NodeKind, Rel, node_urn
from domain.graph_port import name_matches
from domain.kg.proposals import LineageEdgeProposal

RELS = {"READS": Rel.READS_FROM, "WRITES": Rel.WRITES_TO}


@dataclass(frozen=True, slots=True)
class ResolvedProposal:
    """A valid proposal and the LLM edge it stands for (properties are added on record)."""

    proposal: LineageEdgeProposal
    edge: LineageEdge


@dataclass(frozen=True, slots=True)
class Resolution:
    resolved: tuple[ResolvedProposal, ...] = ()
    dropped: dict[str, int] | None = None


class UnresolvedName(ValueError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def resolve_proposals(
    proposals: Sequence[LineageEdgeProposal],
    *,
    project_id: str,
    path: str,
    code: str,
    known: Sequence[LineageNode],
) -> Resolution:
    """Resolve every proposal; the unresolvable ones are counted by reason."""
    resolved: list[ResolvedProposal] = []
    dropped: Counter[str] = Counter()
    seen: set[str] = set()
    for proposal in proposals:
        try:
            source = resolve_name(proposal.source_node, project_id, path, code, known)
            target = resolve_name(proposal.target_node, project_id, path, code, known)
        except UnresolvedName as error:
            dropped[error.reason] += 1
            continue
        if source == target:
            dropped["self_loop"] += 1
            continue
        lines = evidence_lines(code, proposal.target_node, proposal.source_node)
        edge = LineageEdge(
            source=source,
            target=target,
            rel=RELS[proposal.relationship_type],
            project_id=project_id,
            file_path=path,
            line_start=lines[0],
            line_end=lines[1],
            provenance="llm",
            confidence=proposal.confidence,
        )
        if edge.edge_id in seen:
            dropped["duplicate"] += 1
            continue
        seen.add(edge.edge_id)
        resolved.append(ResolvedProposal(proposal, edge))
    return Resolution(tuple(resolved), dict(sorted(dropped.items())))


def resolve_name(
    name: str, project_id: str, path: str, code: str, known: Sequence[LineageNode]
) -> str:
    """The URN a proposal's node name stands for, or `UnresolvedName`."""
    if name == path or name.lower() == path.rsplit("/", 1)[-1].lower():
        return node_urn(NodeKind.FILE, project_id, path)
    matches = [n for n in known if n.project_id == project_id and name_matches(n, name)]
    unique = {n.urn: n for n in matches}
    if unique:
        return _best(name, path, list(unique.values()))
    if name.startswith("urn:li:"):
        raise UnresolvedName("unknown_node")
    if not mentions(code, name):
        raise UnresolvedName("unknown_node")
    return node_urn(NodeKind.TABLE, project_id, name.lower())


def _best(name: str, path: str, nodes: list[LineageNode]) -> str:
    """Several nodes match: the exact name, then one defined in this file, then a dataset."""
    for rule in (
        lambda n: n.name.lower() == name.lower() or n.urn == name,
        lambda n: n.path == path,
        lambda n: n.kind in DATASET_KINDS,
    ):
        narrowed = [n for n in nodes if rule(n)]
        if len(narrowed) == 1:
            return narrowed[0].urn
        if narrowed:
            nodes = narrowed
    if len(nodes) == 1:
        return nodes[0].urn
    raise UnresolvedName("ambiguous_node")


def mentions(code: str, name: str) -> bool:
    """The code names `name` as a whole word (case-insensitive; dots allowed inside)."""
    return _word(name).search(code) is not None


def evidence_lines(code: str, *names: str) -> tuple[int, int]:
    """The first line mentioning one of `names` (in order), else the whole file."""
    lines = code.split("\n")
    for name in names:
        pattern = _word(name.rsplit("#", 1)[-1])
        for number, line in enumerate(lines, start=1):
            if pattern.search(line):
                return number, number
    return 1, max(1, len(lines))


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.]){re.escape(name)}(?![\w])", re.IGNORECASE)
