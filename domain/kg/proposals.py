"""LLM lineage proposals (llm-service.md "Lineage proposal structure"): the strict-JSON answer
format the `kg_edge_creation` chain is asked for, and the checks every proposal must pass.

A model answers `{"proposals": [...]}`; each item must be exactly a `LineageEdgeProposal`.
Items that are not are dropped and counted by reason; the valid ones go on to be resolved
against the graph (`domain.kg.resolve`) and verified against the parser (`domain.kg.verify`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

RelationshipType = Literal["READS", "WRITES"]
RELATIONSHIP_TYPES: tuple[str, ...] = ("READS", "WRITES")
MAX_NODE_CHARS = 200
MAX_REASONING_CHARS = 500
DEFAULT_MAX_PROPOSALS = 10
FIELDS = ("source_node", "target_node", "relationship_type", "confidence", "reasoning")


def proposals_schema(max_proposals: int = DEFAULT_MAX_PROPOSALS) -> dict[str, Any]:
    """The JSON schema sent as `response_format` (strict JSON mode; also a grammar for
    llama.cpp): an object with a `proposals` array of `LineageEdgeProposal`s.

    String lengths are checked by `check_proposal`, not here: a `maxLength` becomes a grammar
    rule per character in llama.cpp and halves its speed."""
    item = {
        "type": "object",
        "properties": {
            "source_node": {"type": "string"},
            "target_node": {"type": "string"},
            "relationship_type": {"type": "string", "enum": list(RELATIONSHIP_TYPES)},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "reasoning": {"type": "string"},
        },
        "required": list(FIELDS),
        "additionalProperties": False,
    }
    return {
        "title": "lineage edge proposals",
        "type": "object",
        "properties": {"proposals": {"type": "array", "items": item, "maxItems": max_proposals}},
        "required": ["proposals"],
        "additionalProperties": False,
    }


@dataclass(frozen=True, slots=True)
class LineageEdgeProposal:
    """One edge a model proposes: `source_node` READS (data from) or WRITES (data into)
    `target_node`, with its confidence (0.0-1.0) and a brief reasoning."""

    source_node: str
    target_node: str
    relationship_type: RelationshipType
    confidence: float
    reasoning: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_node": self.source_node,
            "target_node": self.target_node,
            "relationship_type": self.relationship_type,
            "confidence": self.confidence,
            "reasoning": self.reasoning,
        }


@dataclass(frozen=True, slots=True)
class CheckedProposals:
    """The valid proposals, in answer order, and how many were dropped for which reason."""

    valid: tuple[LineageEdgeProposal, ...] = ()
    dropped: Mapping[str, int] = field(default_factory=dict)

    @property
    def dropped_count(self) -> int:
        return sum(self.dropped.values())


class InvalidProposal(ValueError):
    """One proposal broke a rule; `reason` is a short stable code."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check_proposals(
    data: Mapping[str, Any] | None, max_proposals: int = DEFAULT_MAX_PROPOSALS
) -> CheckedProposals:
    """Validate a model's answer item by item; never raises for bad content."""
    items = data.get("proposals") if isinstance(data, Mapping) else None
    if not isinstance(items, list):
        return CheckedProposals(dropped={"no_proposals_array": 1} if data is not None else {})
    valid: list[LineageEdgeProposal] = []
    dropped: Counter[str] = Counter()
    seen: set[tuple[str, str, str]] = set()
    for item in items:
        try:
            proposal = check_proposal(item)
        except InvalidProposal as error:
            dropped[error.reason] += 1
            continue
        key = (
            proposal.source_node.lower(),
            proposal.target_node.lower(),
            proposal.relationship_type,
        )
        if key in seen:
            dropped["duplicate"] += 1
        elif len(valid) >= max_proposals:
            dropped["too_many"] += 1
        else:
            seen.add(key)
            valid.append(proposal)
    return CheckedProposals(tuple(valid), dict(sorted(dropped.items())))


def check_proposal(item: Any) -> LineageEdgeProposal:
    """One `LineageEdgeProposal` from a JSON item, or `InvalidProposal`."""
    if not isinstance(item, Mapping):
        raise InvalidProposal("not_an_object")
    missing = [name for name in FIELDS if name not in item]
    if missing:
        raise InvalidProposal("missing_field")
    source = _node(item["source_node"])
    target = _node(item["target_node"])
    if source.lower() == target.lower():
        raise InvalidProposal("self_loop")
    kind = item["relationship_type"]
    if not isinstance(kind, str) or kind.strip().upper() not in RELATIONSHIP_TYPES:
        raise InvalidProposal("bad_relationship_type")
    confidence = item["confidence"]
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise InvalidProposal("bad_confidence")
    if not math.isfinite(confidence) or not 0.0 <= confidence <= 1.0:
        raise InvalidProposal("bad_confidence")
    reasoning = item["reasoning"]
    if not isinstance(reasoning, str):
        raise InvalidProposal("bad_reasoning")
    relationship: RelationshipType = "READS" if kind.strip().upper() == "READS" else "WRITES"
    return LineageEdgeProposal(
        source_node=source,
        target_node=target,
        relationship_type=relationship,
        confidence=float(confidence),
        reasoning=" ".join(reasoning.split())[:MAX_REASONING_CHARS],
    )


def _node(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidProposal("bad_node")
    name = value.strip().strip("`\"'[]").strip()
    if not name:
        raise InvalidProposal("empty_node")
    if len(name) > MAX_NODE_CHARS or "\n" in name:
        raise InvalidProposal("bad_node")
    return name


@dataclass(frozen=True, slots=True)
class ConfidenceSummary:
    """min / median / max of a run's proposal confidences (None when nothing was proposed)."""

    minimum: float | None = None
    median: float | None = None
    maximum: float | None = None

    @classmethod
    def of(cls, values: list[float]) -> ConfidenceSummary:
        if not values:
            return cls()
        ordered = sorted(values)
        middle = len(ordered) // 2
        median = (
            ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
        )
        return cls(round(ordered[0], 4), round(median, 4), round(ordered[-1], 4))

    def to_dict(self) -> dict[str, float | None]:
        return {"min": self.minimum, "median": self.median, "max": self.maximum}

    def text(self) -> str:
        if self.minimum is None:
            return "none"
        return f"min {self.minimum:.2f} / median {self.median:.2f} / max {self.maximum:.2f}"
