"""Subjects of the KG enrichment commands (request-reply, answered with a CommandResult)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from commands.kg import AcceptLineageEdge, ProposeKGEdges, RejectLineageEdge
from commands.models import Command, CommandResult

CMD_KG_PROPOSE_EDGES = "cmd.kg.propose_edges"
CMD_KG_ACCEPT_EDGE = "cmd.kg.accept_edge"
CMD_KG_REJECT_EDGE = "cmd.kg.reject_edge"


def kg_routes(app: Any) -> list[tuple[str, type[Command], Callable[[Any], CommandResult], str]]:
    """The KG commands' intake routes (subject, payload model, handler, description)."""
    return [
        (
            CMD_KG_PROPOSE_EDGES,
            ProposeKGEdges,
            app.propose_kg_edges,
            "ProposeKGEdges: ask the KG enrichment policy for LLM lineage edges of a project.",
        ),
        (
            CMD_KG_ACCEPT_EDGE,
            AcceptLineageEdge,
            app.accept_lineage_edge,
            "AcceptLineageEdge: a reviewer accepts an LLM-proposed edge.",
        ),
        (
            CMD_KG_REJECT_EDGE,
            RejectLineageEdge,
            app.reject_lineage_edge,
            "RejectLineageEdge: a reviewer rejects an LLM-proposed edge.",
        ),
    ]
