"""`GET /health`: each component as ok, degraded or down, and the profile in use."""

from __future__ import annotations

import time
from typing import Any, Protocol

from domain.index_tuning import recommended_hnsw

OK, DEGRADED, DOWN = "ok", "degraded", "down"


class HealthSources(Protocol):
    """What a running process exposes for health: duck-typed by the bootstrap container."""

    settings: Any
    role: Any
    app: Any
    embedder: Any
    index: Any
    projections: dict[str, Any]
    nats_url: str | None
    nats_server: Any
    broker: Any
    relay: Any
    reindex: Any
    runners: dict[str, Any]
    startup: list[Any]
    started_at: float | None

    def read_model_position(self, name: str) -> int: ...


def build_health(sources: HealthSources) -> dict[str, Any]:
    store = _event_store(sources)
    head = int(store.get("position", 0))
    components = {
        "bus": _bus(sources),
        "event_store": store,
        "relay": _relay(sources, head),
        "projections": {n: _projection(sources, n, head) for n in sources.projections},
        "vector_store": _vector_store(sources),
        "embedder": _embedder(sources),
    }
    caches = getattr(sources, "caches", None)
    if caches is not None:  # degraded while Redis is unreachable: requests run uncached
        components["cache"] = _cache(caches)
    return {
        "status": _overall(components),
        "profile": sources.settings.profile,
        "role": sources.role,
        "uptime_s": round(time.time() - sources.started_at, 1) if sources.started_at else 0.0,
        "startup": [{"step": s.name, "seconds": s.seconds} for s in sources.startup],
        "components": components,
        **_cross_encoder(sources),
        "rag": _rag(sources),
    }


def _rag(sources: Any) -> dict[str, Any]:
    """The active retrieval pipeline (LLM-08: which implementation answers) and the others."""
    chat = getattr(sources, "chat", None)
    if chat is None:
        return {"pipeline": None, "pipelines": []}
    return {
        "pipeline": chat.config.default_pipeline,
        "pipelines": [
            {"name": name, "description": p.description}
            for name, p in sorted(chat.pipelines.items())
        ],
    }


def _overall(components: dict[str, Any]) -> str:
    statuses = [c["status"] for k, c in components.items() if k != "projections"]
    statuses += [p["status"] for p in components["projections"].values()]
    if DOWN in statuses:
        return DOWN
    return DEGRADED if DEGRADED in statuses else OK


def _bus(sources: HealthSources) -> dict[str, Any]:
    if sources.broker is None:
        return {"status": DOWN, "detail": "not started"}
    embedded = sources.nats_server is not None
    running = sources.nats_server.running() if embedded else True
    connected = _broker_connected(sources.broker)
    status = OK if (running and connected) else DOWN
    return {"status": status, "url": sources.nats_url, "embedded": embedded}


def _broker_connected(broker: Any) -> bool:
    try:
        connection = broker.config.connection_state.connection
        return bool(getattr(connection, "is_connected", True))
    except AttributeError:
        return True


def _event_store(sources: HealthSources) -> dict[str, Any]:
    try:
        return {
            "status": OK,
            "persistence": sources.settings.persistence_module,
            "position": sources.app.max_position(),
        }
    except Exception as error:  # the store is a server in production
        return {"status": DOWN, "error": f"{type(error).__name__}: {error}"}


def _relay(sources: HealthSources, head: int) -> dict[str, Any]:
    relay = sources.relay
    if relay is None:
        return {"status": OK, "detail": "runs in the worker processes"}
    lag = max(0, head - relay.position)
    status = DEGRADED if relay.last_error else OK
    return {"status": status, "position": relay.position, "lag": lag, "error": relay.last_error}


def _projection(sources: HealthSources, name: str, head: int) -> dict[str, Any]:
    try:
        position = sources.read_model_position(name)
    except Exception as error:
        return {"status": DOWN, "error": f"{type(error).__name__}: {error}"}
    runner = sources.runners.get(name)
    last_error = runner.last_error if runner is not None else None
    return {
        "status": DEGRADED if last_error else OK,
        "position": position,
        "lag": max(0, head - position),
        "error": last_error,
    }


def _vector_store(sources: HealthSources) -> dict[str, Any]:
    settings = sources.settings
    try:
        points = sources.index.count()
    except Exception as error:
        return {"status": DOWN, "error": f"{type(error).__name__}: {error}"}
    return {
        "status": OK,
        "backend": "qdrant-server" if settings.qdrant_url else "qdrant-local",
        "collection": settings.qdrant_collection,
        "points": points,
        "hnsw": {"m": settings.qdrant_hnsw_m, "ef_construct": settings.qdrant_hnsw_ef_construct},
        "recommended_hnsw": recommended_hnsw(points).to_dict(),
        "reindex_schedule": settings.reindex_schedule,
        "last_reindex": sources.reindex.last_report if sources.reindex else None,
    }


def _cache(caches: Any) -> dict[str, Any]:
    try:
        report: dict[str, Any] = caches.health()
    except Exception as error:
        return {"status": DEGRADED, "error": f"{type(error).__name__}: {error}"}
    return report


def _embedder(sources: HealthSources) -> dict[str, Any]:
    embedder = sources.embedder
    try:
        return {"status": OK, "model": embedder.model_name, "dimension": embedder.dimension}
    except Exception as error:
        return {"status": DOWN, "error": f"{type(error).__name__}: {error}"}


def _cross_encoder(sources: Any) -> dict[str, Any]:
    """`cross_encoder` only when a model is loaded (its absence keeps the old format)."""
    reranker = getattr(sources, "reranker", None)
    if reranker is None or not getattr(reranker, "loaded", True):
        return {}
    return {"cross_encoder": {"model": reranker.model_name, "status": "loaded"}}
