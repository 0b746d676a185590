"""Cache warming (USE_CACHE_WARMING=true): at start-up, embed the names of the graph's most
connected entities, so the first questions about them find their embeddings cached."""

from __future__ import annotations

import logging
import time
from typing import Any

from domain.ports import Embedder

log = logging.getLogger(__name__)


def warm_embedding_cache(graph: Any, embedder: Embedder, limit: int = 1000) -> dict[str, Any]:
    """Embed the `limit` most connected entity names through the (caching) embedder; names
    cached already cost nothing. Returns what was done, for /api/v1/rag/status."""
    started = time.perf_counter()
    names = graph.most_connected_names(limit)
    misses_before = getattr(embedder, "misses", 0)
    if names:
        embedder.embed(names)
    embedded = getattr(embedder, "misses", 0) - misses_before
    report = {
        "entities": len(names),
        "embedded": embedded,
        "already_cached": len(names) - embedded,
        "seconds": round(time.perf_counter() - started, 3),
    }
    log.info(
        "cache warming: %d entity names, %d embedded, %d already cached (%.1f s)",
        report["entities"],
        report["embedded"],
        report["already_cached"],
        report["seconds"],
    )
    return report
