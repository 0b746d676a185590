"""The row shape a lineage node takes in the graph databases (Ladybug and Neo4j alike)."""

from __future__ import annotations

import json
from typing import Any

from domain.graph import LineageNode
from domain.graph_port import last_segment, node_key


def dumps(properties: dict[str, Any]) -> str:
    """Properties as a stable JSON string (both databases store them as one string column)."""
    return json.dumps(properties, sort_keys=True, default=str)


def node_row(tenant_id: str, node: LineageNode) -> dict[str, Any]:
    return {
        "key": node_key(tenant_id, node.urn),
        "urn": node.urn,
        "tenant_id": tenant_id,
        "project_id": node.project_id,
        "kind": str(node.kind),
        "name": node.name,
        "lname": node.name.lower(),
        "lseg": last_segment(node.kind, node.name),
        "path": node.path,
        "properties": dumps(node.properties),
    }
