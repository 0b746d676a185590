"""The lineage graph's value objects: nodes, edges with evidence, and what one file contributes.

Edge directions (every traversal relies on them):

- ``(T)-[:READS_FROM]->(S)``: dataset or process T reads from dataset S (a view, model,
  CTAS/INSERT target, Python function, procedure or file that reads S). Upstream of X follows
  outgoing READS_FROM/DERIVES edges from X; downstream follows incoming ones.
- ``(P)-[:WRITES_TO]->(T)``: process P (function, procedure, file) writes dataset T. Whenever a
  statement both reads S and writes T, the extractor also records ``(T)-[:READS_FROM]->(S)``
  with ``via`` = the process, so dataset-to-dataset lineage never needs a process hop.
- ``(C2)-[:DERIVES]->(C1)``: column C2 is computed from column C1 (same direction as
  READS_FROM: downstream -> upstream).
- ``(X)-[:DEFINED_IN]->(F)``: node X is defined in file F.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from domain.urn import Urn

_EDGE_NS = uuid.UUID("3c1d5e7f-9a2b-4c6d-8e0f-1a2b3c4d5e6f")


class NodeKind(StrEnum):
    TABLE = "table"
    VIEW = "view"
    COLUMN = "column"
    CTE = "cte"
    PROCEDURE = "procedure"
    DBT_MODEL = "dbt_model"
    DBT_SOURCE = "dbt_source"
    DBT_SEED = "dbt_seed"
    FILE = "file"
    PYTHON_FUNCTION = "python_function"


class Rel(StrEnum):
    READS_FROM = "READS_FROM"
    WRITES_TO = "WRITES_TO"
    DERIVES = "DERIVES"
    DEFINED_IN = "DEFINED_IN"


# Datasets share one URN type, whatever their kind, so a table referenced by plain SQL and the
# dbt model or view that builds it are one node. The kind is a property that only ever gets
# more specific (table -> view / dbt_model).
_URN_TYPE = {
    NodeKind.TABLE: "dataset",
    NodeKind.VIEW: "dataset",
    NodeKind.DBT_MODEL: "dataset",
    NodeKind.DBT_SOURCE: "dataset",
    NodeKind.DBT_SEED: "dataset",
    NodeKind.COLUMN: "column",
    NodeKind.CTE: "cte",
    NodeKind.PROCEDURE: "procedure",
    NodeKind.FILE: "file",
    NodeKind.PYTHON_FUNCTION: "function",
}
DATASET_KINDS = frozenset(
    {NodeKind.TABLE, NodeKind.VIEW, NodeKind.DBT_MODEL, NodeKind.DBT_SOURCE, NodeKind.DBT_SEED}
)


def node_urn(kind: NodeKind, project_id: str, name: str) -> str:
    """`name` is the asset path: `schema.table`, `schema.table.column`, `path#cte`, a file path,
    `path#qualified.function`."""
    return str(Urn(_URN_TYPE[kind], project_id, name))


@dataclass(frozen=True, slots=True)
class LineageNode:
    """A table, view, column, CTE, procedure, dbt node, file or Python function."""

    urn: str
    kind: NodeKind
    name: str
    project_id: str
    path: str | None = None  # the file that defines it, when known
    properties: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        kind: NodeKind,
        project_id: str,
        name: str,
        path: str | None = None,
        **properties: Any,
    ) -> LineageNode:
        return cls(node_urn(kind, project_id, name), kind, name, project_id, path, properties)

    def to_dict(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "kind": str(self.kind),
            "name": self.name,
            "project_id": self.project_id,
            "path": self.path,
            "properties": dict(self.properties),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LineageNode:
        return cls(
            urn=data["urn"],
            kind=NodeKind(data["kind"]),
            name=data["name"],
            project_id=data["project_id"],
            path=data.get("path"),
            properties=dict(data.get("properties") or {}),
        )


def edge_id(
    project_id: str, rel: Rel, source: str, target: str, file_path: str, provenance: str = "parser"
) -> str:
    """Deterministic: the same relation found in the same file is the same edge. An LLM
    proposal of a relation the parser also found is another edge (it never overwrites it)."""
    key = f"{project_id}|{rel}|{source}|{target}|{file_path}"
    if provenance != "parser":
        key += f"|{provenance}"
    return str(uuid.uuid5(_EDGE_NS, key))


@dataclass(frozen=True, slots=True)
class LineageEdge:
    """A directed relation with its evidence: where it was found and how sure we are."""

    source: str  # urn
    target: str  # urn
    rel: Rel
    project_id: str
    file_path: str
    line_start: int
    line_end: int
    provenance: str = "parser"  # "parser" | "llm"
    dialect: str | None = None
    confidence: float = 1.0
    conditional: bool = False  # found only inside a Jinja {% if %}/{% for %} block
    via: str | None = None  # the process (function/procedure/file urn) that makes it happen
    properties: dict[str, Any] = field(default_factory=dict)

    @property
    def edge_id(self) -> str:
        return edge_id(
            self.project_id, self.rel, self.source, self.target, self.file_path, self.provenance
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "edge_id": self.edge_id,
            "source": self.source,
            "target": self.target,
            "rel": str(self.rel),
            "project_id": self.project_id,
            "file_path": self.file_path,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "provenance": self.provenance,
            "dialect": self.dialect,
            "confidence": self.confidence,
            "conditional": self.conditional,
            "via": self.via,
            "properties": dict(self.properties),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LineageEdge:
        return cls(
            source=data["source"],
            target=data["target"],
            rel=Rel(data["rel"]),
            project_id=data["project_id"],
            file_path=data["file_path"],
            line_start=int(data["line_start"]),
            line_end=int(data["line_end"]),
            provenance=data.get("provenance", "parser"),
            dialect=data.get("dialect"),
            confidence=float(data.get("confidence", 1.0)),
            conditional=bool(data.get("conditional", False)),
            via=data.get("via"),
            properties=dict(data.get("properties") or {}),
        )


@dataclass(frozen=True, slots=True)
class FileLineage:
    """Everything one file contributes to the graph, and what could not be parsed."""

    nodes: tuple[LineageNode, ...] = ()
    edges: tuple[LineageEdge, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Subgraph:
    """A traversal's answer: nodes, edges (with evidence) and the paths from the start node."""

    start: str
    nodes: tuple[LineageNode, ...] = ()
    edges: tuple[LineageEdge, ...] = ()
    paths: tuple[tuple[str, ...], ...] = ()  # each a sequence of urns starting at `start`
