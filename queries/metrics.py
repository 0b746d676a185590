"""Prometheus metrics, read from the running parts at scrape time (`GET /metrics`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


class SpineCollector(Collector):
    """Event-store head, relay and projection progress, lag and failures."""

    def __init__(self, sources: Any) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Any]:
        head = self.sources.app.max_position()
        yield GaugeMetricFamily(
            "upstream_event_store_position", "Last event position recorded", value=head
        )
        relay = self.sources.relay
        if relay is not None:
            yield CounterMetricFamily(
                "upstream_relay_published", "Events published to JetStream", value=relay.published
            )
            yield GaugeMetricFamily(
                "upstream_relay_lag_events", "Events not yet published", value=head - relay.position
            )
        yield from self._projections(head)

    def _projections(self, head: int) -> Iterator[Any]:
        lag = GaugeMetricFamily(
            "upstream_projection_lag_events", "Events not yet applied", labels=["projection"]
        )
        applied = CounterMetricFamily(
            "upstream_projection_applied", "Events applied", labels=["projection"]
        )
        failures = CounterMetricFamily(
            "upstream_projection_failures", "Failed attempts (retried)", labels=["projection"]
        )
        for name in self.sources.projections:
            lag.add_metric([name], max(0, head - self.sources.read_model_position(name)))
            runner = self.sources.runners.get(name)
            applied.add_metric([name], runner.applied if runner else 0)
            failures.add_metric([name], runner.failures if runner else 0)
        yield from (lag, applied, failures)


class Metrics:
    """One registry per process (tests build several processes in one interpreter)."""

    def __init__(self, sources: Any, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.registry.register(SpineCollector(sources))
        if getattr(sources, "caches", None) is not None:
            from queries.cache_metrics import CacheCollector

            self.registry.register(CacheCollector(sources.caches))
        self.search_seconds = Histogram(
            "upstream_search_seconds",
            "Search latency",
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
