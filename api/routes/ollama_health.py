"""`GET /health/ollama`: Ollama's status as the background monitor last saw it.

Always 200: the service keeps answering without Ollama (the chains fall back), so its state is
reported inside the body (`status`: healthy, degraded or unavailable), refreshed every 30 s by
`queries.ollama_health.OllamaHealthMonitor`. `?refresh=true` checks now.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from queries.ollama_health import UNAVAILABLE, OllamaHealthMonitor

router = APIRouter(tags=["operations"])


@router.get("/health/ollama")
async def ollama_health(request: Request, refresh: bool = False) -> dict[str, Any]:
    """status, memory_available_mb, models_loaded, fallback_configured, missing models with
    their `ollama pull` commands, quantization and the safe context window."""
    container = getattr(request.app.state, "container", None)
    monitor = getattr(container, "ollama_health", None)
    if not isinstance(monitor, OllamaHealthMonitor):
        return {
            "status": UNAVAILABLE,
            "error": "Ollama health monitoring is not configured in this process",
            "memory_available_mb": None,
            "models_loaded": [],
            "fallback_configured": False,
        }
    if refresh:
        return await monitor.check()
    return await monitor.snapshot()
