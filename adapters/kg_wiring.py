"""Wiring of the KG enrichment parts into the container (kept out of `bootstrap.py`).

`build_kg` makes the `kg` read model (a SQLite file under the data dir), its
projection and the query service; `start_kg_policy` starts the enrichment policy on the write
side (`serve` and `worker`), on a JetStream consumer of its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from adapters.kg_settings import KGSettings
from adapters.kg_sqlite import SqliteKGStore
from adapters.settings import Settings
from projections.kg import KGProjection
from projections.kg_enrichment import USAGE_TYPE, KGEnrichmentPolicy
from queries.kg import KGService

log = logging.getLogger(__name__)


@dataclass
class KGParts:
    store: SqliteKGStore
    projection: KGProjection
    service: KGService


def build_kg(settings: Settings, role: str, model_configs: Any) -> KGParts:
    """One file for every role on a machine: `serve` (or a `worker`) writes it, an `api` on
    the same data dir reads it, and an offline `upstream replay kg` rebuilds the same file."""
    store = SqliteKGStore(settings.data_dir / "kg.sqlite")
    return KGParts(store, KGProjection(store), KGService(store, model_configs))


async def start_kg_policy(container: Any, js: Any) -> Any:
    """Start the policy's runner (the caller keeps it in `container.runners`)."""
    from bus.kg_policy_runner import PolicyRunner

    kg = container.kg
    projection = container.projections.get("kg")
    policy = KGEnrichmentPolicy(
        container.app,
        container.gateway,
        lambda: container.model_configs.fallback_chain(USAGE_TYPE),
        container.graph,
        kg.store,
        options=KGSettings().options(),
        free_tier=container.free_tier,
        kg_position=projection.position if projection is not None else None,
        wake=container.relay.wake if container.relay is not None else None,
    )
    runner = PolicyRunner(js, policy)
    await runner.start()
    return runner
