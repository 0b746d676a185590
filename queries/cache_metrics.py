"""The caches' figures in Prometheus form (`GET /metrics`): the same as /api/v1/rag/status."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


class CacheCollector(Collector):
    """Hits, misses, hit rates and entries per cache; embedder calls saved; memory; the last
    invalidation; whether the cache store is reachable."""

    def __init__(self, caches: Any) -> None:
        self.caches = caches

    def collect(self) -> Iterator[Any]:
        status = self.caches.status()
        per_cache = {
            "embedding": status["embedding"],
            "exact": status["exact"],
            "semantic": status["semantic"],
        }
        hits = CounterMetricFamily("upstream_cache_hits", "Cache hits", labels=["cache"])
        misses = CounterMetricFamily("upstream_cache_misses", "Cache misses", labels=["cache"])
        rate = GaugeMetricFamily("upstream_cache_hit_rate", "Hits / lookups", labels=["cache"])
        entries = GaugeMetricFamily("upstream_cache_entries", "Entries held", labels=["cache"])
        for name, figures in per_cache.items():
            hits.add_metric([name], figures.get("hits", 0))
            misses.add_metric([name], figures.get("misses", 0))
            rate.add_metric([name], figures.get("hit_rate", 0.0))
            if figures.get("entries") is not None:
                entries.add_metric([name], figures["entries"])
        yield from (hits, misses, rate, entries)
        embedding = status["embedding"]
        yield CounterMetricFamily(
            "upstream_embedder_calls_saved",
            "Embed requests answered entirely from the embedding cache",
            value=embedding.get("embedder_calls_saved", 0),
        )
        yield CounterMetricFamily(
            "upstream_embedding_texts_saved",
            "Texts not sent to the embedding model thanks to the cache",
            value=embedding.get("texts_saved", 0),
        )
        yield CounterMetricFamily(
            "upstream_embedder_calls",
            "Calls to the embedding model (cache misses, in sub-batches)",
            value=embedding.get("embedder_calls", 0),
        )
        yield from self._backend(status)

    def _backend(self, status: dict[str, Any]) -> Iterator[Any]:
        backend = status["backend"]
        yield GaugeMetricFamily(
            "upstream_cache_available",
            "1 when the cache store answers, 0 during an outage (requests run uncached)",
            value=1 if backend.get("available") else 0,
        )
        if backend.get("memory_bytes") is not None:
            yield GaugeMetricFamily(
                "upstream_cache_memory_bytes",
                "Memory used by the cache store (Redis: the server's used_memory)",
                value=backend["memory_bytes"],
            )
        yield CounterMetricFamily(
            "upstream_cache_invalidated_answers",
            "Cached answers dropped by invalidations (explicit and dependency-aware)",
            value=status.get("invalidated_answers", 0),
        )
        last = status.get("last_invalidation")
        if last:
            yield GaugeMetricFamily(
                "upstream_cache_last_invalidation_position",
                "Event position of the last explicit invalidation",
                value=last.get("position", 0),
            )
            yield GaugeMetricFamily(
                "upstream_cache_last_invalidation_timestamp_seconds",
                "When the last explicit invalidation was recorded",
                value=_epoch(last.get("at")),
            )


def _epoch(text: Any) -> float:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return 0.0
