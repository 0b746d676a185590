"""Builds the caches for `bootstrap()`: one store, the caching embedder, the answer cache and
the cache projection, plus start-up warming and the figures of `/api/v1/rag/status`.

Redis at `REDIS_URL` when set (shared by every process), else an in-process TTL cache and a
warning. The semantic cache's `query_cache` collection is on the Qdrant server at `QDRANT_URL`,
else in Qdrant local mode in its own folder (local mode locks its folder).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from adapters.cache_store import MemoryStore, RedisStore
from adapters.embedding_cache import CachingEmbedder
from adapters.qdrant_query_cache import QdrantQueryCache
from adapters.settings import Settings
from domain.cache_ports import KeyValueStore
from domain.ports import Embedder
from projections.cache import CacheProjection, CacheReadModel
from queries.answer_cache import AnswerCache, EntityLookup

log = logging.getLogger(__name__)


@dataclass
class Caches:
    """Every cache of one process, and what they need at start and stop."""

    settings: Settings
    role: str
    store: KeyValueStore
    embedding_store: KeyValueStore
    embedder: Embedder  # a CachingEmbedder, unless USE_EMBEDDING_CACHE=false
    answers: AnswerCache
    projection: CacheProjection
    graph: Any = None
    warming: dict[str, Any] = field(default_factory=lambda: {"enabled": False})
    _warming_task: asyncio.Task[None] | None = None

    def projections(self) -> dict[str, CacheProjection]:
        """The cache projection, where it has a read model of its own to keep: not in an
        `api` process with an in-process cache (its answers expire by TTL only)."""
        if self.role == "api" and not self.store.shared:
            return {}
        return {self.projection.name: self.projection}

    def read_model_position(self) -> int:
        return int(self.projection.model.checkpoint(self.projection.name))

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        """Log the backend; start warming the embedding cache when USE_CACHE_WARMING."""
        if not self.store.shared and self.role != "offline":
            log.warning(
                "REDIS_URL is not set: caches are in-process (lost on restart%s)",
                ", and not invalidated by the workers" if self.role == "api" else "",
            )
        if self.settings.use_cache_warming and self.graph is not None:
            self.warming = {"enabled": True, "state": "running"}
            self._warming_task = asyncio.create_task(self._warm())

    async def _warm(self) -> None:
        from queries.cache_warming import warm_embedding_cache

        try:
            report = await asyncio.to_thread(
                warm_embedding_cache,
                self.graph,
                self.embedder,
                self.settings.cache_warming_entities,
            )
            self.warming = {"enabled": True, "state": "done", **report}
        except Exception as error:  # warming is an optimisation: never fatal
            log.warning("cache warming failed: %s", error)
            self.warming = {"enabled": True, "state": "failed", "error": str(error)}

    async def wait_warmed(self) -> None:
        if self._warming_task is not None:
            await self._warming_task

    async def after_replay(self, names: list[str]) -> None:
        """A reindex (a rebuilt vectors or graph read model) flushes every cached answer."""
        rebuilt = sorted(set(names) & {"vectors", "graph"})
        if rebuilt:
            await asyncio.to_thread(self.answers.flush, f"reindex: {', '.join(rebuilt)} rebuilt")

    async def stop(self) -> None:
        if self._warming_task is not None:
            self._warming_task.cancel()
            with contextlib.suppress(BaseException):
                await self._warming_task
        self.answers.close()
        self.store.close()
        if self.embedding_store is not self.store:
            self.embedding_store.close()

    # -- figures ------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The body of `GET /api/v1/rag/status`."""
        embedding = (
            self.embedder.stats()
            if isinstance(self.embedder, CachingEmbedder)
            else {"enabled": False, "model": self.embedder.model_name}
        )
        return {
            "backend": self.store.status(),
            "embedding": {"enabled": isinstance(self.embedder, CachingEmbedder), **embedding},
            **self.answers.status(),
            "warming": self.warming,
            "at": time.time(),
        }

    def health(self) -> dict[str, Any]:
        """The `cache` component of `/health`: degraded while Redis is unreachable."""
        available = self.store.probe()
        report: dict[str, Any] = {
            "status": "ok" if available else "degraded",
            "backend": self.store.backend,
        }
        if not available:
            report["detail"] = "redis unreachable: every request runs uncached"
        return report


def build_store(settings: Settings, max_entries: int | None = None) -> KeyValueStore:
    if settings.redis_url:
        return RedisStore(
            settings.redis_url,
            prefix=settings.cache_key_prefix,
            timeout_s=settings.redis_timeout_s,
            retry_interval_s=settings.redis_retry_interval_s,
        )
    return MemoryStore(
        prefix=settings.cache_key_prefix,
        max_entries=max_entries or settings.cache_memory_max_entries,
    )


def build_query_cache(settings: Settings) -> QdrantQueryCache:
    if settings.qdrant_url:
        key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return QdrantQueryCache(url=settings.qdrant_url, api_key=key)
    return QdrantQueryCache(path=settings.data_dir / "qdrant_query_cache")


def graph_entity_lookup(graph: Any) -> EntityLookup:
    """Which words name an entity of the graph (one batched lookup)."""

    def lookup(tenant_id: str, project_id: str | None, words: list[str]) -> list[str]:
        found = graph.find_nodes(tenant_id, project_id, words)
        return [word for word, nodes in found.items() if nodes]

    return lookup


def build_caches(
    settings: Settings, embedder: Embedder, graph: Any, app: Any, role: str = "serve"
) -> Caches:
    """Wrap `embedder` in the embedding cache and build the answer caches and projection."""
    store = build_store(settings)
    # In-process, embeddings get a store of their own: they must not evict cached answers.
    embedding_store = store if store.shared else build_store(settings)
    cached_embedder: Embedder = embedder
    if settings.use_embedding_cache:
        cached_embedder = CachingEmbedder(
            embedder,
            embedding_store,
            ttl_s=settings.embedding_cache_ttl_s,
            sub_batch=settings.embedding_cache_batch,
        )
    answers = AnswerCache(
        store,
        build_query_cache(settings) if settings.use_semantic_cache else None,
        ttl_s=settings.query_cache_ttl_s,
        threshold=settings.semantic_cache_threshold,
        entity_lookup=graph_entity_lookup(graph) if graph is not None else None,
    )
    model = CacheReadModel(
        answers, cached_embedder if isinstance(cached_embedder, CachingEmbedder) else None
    )
    projection = CacheProjection(model, head=app.max_position)
    return Caches(
        settings=settings,
        role=role,
        store=store,
        embedding_store=embedding_store,
        embedder=cached_embedder,
        answers=answers,
        projection=projection,
        graph=graph,
    )
