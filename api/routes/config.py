"""`GET /api/v1/config`: the chat endpoints' model chains, temperatures and timeouts."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter

from api.deps import ContainerDep
from queries.endpoint_config import endpoint_config

router = APIRouter(prefix="/api/v1", tags=["configuration"])


@router.get("/config")
async def config(container: ContainerDep) -> dict[str, Any]:
    """Per chat endpoint: usage type, fallback chain (from the model configurations, with each
    entry's temperature), endpoint temperature and timeout; gateway retry settings."""
    embedder = container.embedder
    embedding = {
        "source": "config" if getattr(container, "embedding_config", None) else "local",
        "model": embedder.model_name,
        "dimension": embedder.dimension,
    }
    return await asyncio.to_thread(
        endpoint_config,
        container.model_configs.get_fallback_chain,
        container.gateway.config,
        embedding=embedding,
    )
