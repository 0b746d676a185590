"""Checking an LLM edge against the parser: the cited code is parsed again and the edge is

- `verified` when the parser supports the relation from the code (the same edge, the process
  that runs the statement, or the file that holds it);
- `contradicted` when the parser proves otherwise: it finds the opposite relation (WRITES for
  READS) or the reverse direction, or, for a dataset a SQL file defines and parses completely
  (no warnings), the parser knows every input and output and this one is not among them;
- `unverified` otherwise (dynamic SQL, code the parser cannot read, names it does not know).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from domain.graph import DATASET_KINDS, FileLineage, LineageEdge, NodeKind, Rel

VerificationStatus = Literal["verified", "contradicted", "unverified"]
VERIFICATIONS: tuple[str, ...] = ("verified", "contradicted", "unverified")
_LINEAGE_RELS = (Rel.READS_FROM, Rel.WRITES_TO)
_WORD = {Rel.READS_FROM: "READS", Rel.WRITES_TO: "WRITES"}

Relation = tuple[Rel, str, str]


@dataclass(frozen=True, slots=True)
class Verification:
    status: VerificationStatus
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"verification": self.status, "detail": self.detail}


def verify(edge: LineageEdge, lineage: FileLineage) -> Verification:
    """Verify one READS/WRITES edge against the parse of the file it cites."""
    names = {n.urn: n.name for n in lineage.nodes}

    def say(rel: Rel, source: str, target: str) -> str:
        return f"{names.get(source, source)} {_WORD[rel]} {names.get(target, target)}"

    if edge.rel not in _LINEAGE_RELS:
        return Verification("unverified", f"{edge.rel} edges are not checked")
    relations = supported_relations(lineage)
    claim = say(edge.rel, edge.source, edge.target)
    if (edge.rel, edge.source, edge.target) in relations:
        return Verification("verified", f"the parser finds {claim} in the code")
    other = Rel.WRITES_TO if edge.rel == Rel.READS_FROM else Rel.READS_FROM
    if (other, edge.source, edge.target) in relations:
        found = say(other, edge.source, edge.target)
        return Verification("contradicted", f"the parser finds {found}, not {claim}")
    if (edge.rel, edge.target, edge.source) in relations:
        found = say(edge.rel, edge.target, edge.source)
        return Verification("contradicted", f"the parser finds the reverse: {found}")
    if fully_parsed_dataset(edge.source, lineage):
        known = sorted(say(*r) for r in relations if r[0] == edge.rel and r[1] == edge.source)
        listed = "; ".join(known) if known else "nothing"
        return Verification(
            "contradicted",
            f"the file defines {names.get(edge.source, edge.source)} and parses completely; "
            f"the parser finds {listed}, not {claim}",
        )
    why = "; ".join(lineage.warnings[:2]) if lineage.warnings else "nothing in the code shows it"
    return Verification("unverified", f"the parser cannot confirm {claim} ({why})")


def supported_relations(lineage: FileLineage) -> set[Relation]:
    """Every (rel, source, target) the parse supports, at every level: the edges themselves,
    the process that runs them (`via`), and the file that holds them."""
    file_urns = {n.urn for n in lineage.nodes if n.kind == NodeKind.FILE}
    relations: set[Relation] = set()
    for edge in lineage.edges:
        if edge.rel not in _LINEAGE_RELS:
            continue
        relations.add((edge.rel, edge.source, edge.target))
        if edge.via is not None:
            relations.add((edge.rel, edge.via, edge.target))
            if edge.rel == Rel.READS_FROM:
                relations.add((Rel.WRITES_TO, edge.via, edge.source))
        relations.update((edge.rel, f, edge.target) for f in file_urns)
    for node in lineage.nodes:
        if node.kind in DATASET_KINDS and node.path is not None:
            relations.update((Rel.WRITES_TO, f, node.urn) for f in file_urns)
    return relations


def fully_parsed_dataset(urn: str, lineage: FileLineage) -> bool:
    """`urn` is a dataset a SQL file defines, and the parse had no warning."""
    if lineage.warnings:
        return False
    for node in lineage.nodes:
        if node.urn == urn:
            defined_here = node.path is not None and node.path.lower().endswith(".sql")
            return node.kind in DATASET_KINDS and defined_here
    return False
