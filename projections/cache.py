"""The cache projection: events that make cached answers stale, applied to the caches.

- `CachesInvalidated(scope)` (the `InvalidateCache` command): `answers` deletes every `query:*`
  entry (SCAN, never KEYS) and truncates `query_cache`; `embeddings` empties the embedding
  cache; `all` both. Logged, and remembered as the last invalidation.
- Ingestion events (`FileIngested`, `FileChunked`, `LineageExtracted`, `LineageEdgesRetracted`,
  `FileDeleted`) drop only the answers whose evidence they touch (`domain.cache`): the file's
  URN, its chunks, the nodes and edges of its lineage. A retracted edge is resolved to its two
  nodes from the edges this read model remembered (`cache:edges:<tenant>`); one it never saw
  (the in-process cache starts at the store's head) flushes every answer instead.

Its view lives in the cache store with its checkpoint (`cache:checkpoint:cache`). An
in-process store is empty at every start, so nothing cached can be stale: it starts at the
event store's head instead of replaying history.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from domain.cache import INGESTION_EVENTS, parse_scope, touched_evidence
from domain.cache_ports import KeyValueStore
from domain.envelope import EventEnvelope
from projections.base import CheckpointedProjection

log = logging.getLogger(__name__)

CHECKPOINT_KEY = "cache:checkpoint:{name}"
EDGES_KEY = "cache:edges:{tenant}"


class CacheReadModel:
    """The projection's store: the answer cache, the embedding cache and the edge map."""

    def __init__(self, answers: Any, embeddings: Any = None) -> None:
        self.answers = answers
        self.embeddings = embeddings
        self.kv: KeyValueStore = answers.kv

    def ensure(self) -> None:
        return None

    def checkpoint(self, name: str) -> int:
        raw = self.kv.get_many([CHECKPOINT_KEY.format(name=name)])[0]
        return int(raw) if raw is not None else 0

    def save_checkpoint(self, name: str, position: int) -> None:
        self.kv.set_many({CHECKPOINT_KEY.format(name=name): str(position).encode()}, None)

    def drop(self) -> None:
        """Before a rebuild: every cached answer, the edge map and the checkpoint go; the
        embedding cache stays (content-addressed, never stale), so the rebuild embeds nothing."""
        self.answers.flush("cache read model rebuilt")
        self.kv.delete_matching("cache:edges:*")
        self.kv.delete_matching(CHECKPOINT_KEY.format(name="*"))

    def remember_edges(self, tenant: str, edges: dict[str, tuple[str, str]]) -> None:
        mapping = {edge_id: f"{s}\t{t}" for edge_id, (s, t) in edges.items()}
        self.kv.hash_set(EDGES_KEY.format(tenant=tenant), mapping)

    def edge_nodes(self, tenant: str, edge_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        values = self.kv.hash_get(EDGES_KEY.format(tenant=tenant), edge_ids)
        found: dict[str, tuple[str, str]] = {}
        for edge_id, value in zip(edge_ids, values, strict=True):
            if value is not None:
                source, _, target = value.partition("\t")
                found[edge_id] = (source, target)
        return found


class CacheProjection(CheckpointedProjection):
    """Read model `cache`: invalidations (explicit and dependency-aware) applied in order."""

    name = "cache"
    relevant_events = INGESTION_EVENTS | {"CachesInvalidated"}

    def __init__(
        self,
        model: CacheReadModel,
        head: Callable[[], int] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__(model)
        self.model = model
        self.head = head
        self.clock = clock

    def start(self) -> None:
        if not self.model.kv.shared and self.head is not None and self.position() == 0:
            position = self.head()
            self.model.save_checkpoint(self.name, position)
            self._position = position
            log.info("cache projection starts at position %d (in-process cache)", position)

    def _apply(self, envelopes: Sequence[EventEnvelope], last: int) -> None:
        pending = _Pending()
        for envelope in envelopes:
            if envelope.event_type == "CachesInvalidated":
                self._invalidate_touched(pending)
                pending = _Pending()
                self._apply_invalidation(envelope)
                continue
            touched = touched_evidence(envelope.event_type, envelope.payload)
            if touched is None:
                continue
            pending.add(touched.tenant_id, touched.urns, self._is_recent(envelope))
            if touched.remembered_edges:
                pending.edges.setdefault(touched.tenant_id, {}).update(touched.remembered_edges)
            if touched.retracted_edges:
                pending.add_retracted(touched.tenant_id, touched.retracted_edges)
        self._invalidate_touched(pending)
        self.model.save_checkpoint(self.name, last)

    def _invalidate_touched(self, pending: _Pending) -> None:
        for tenant, edges in pending.edges.items():
            self.model.remember_edges(tenant, edges)
        unresolved: list[str] = []
        for tenant, edge_ids in pending.retracted.items():
            known = {**self.model.edge_nodes(tenant, edge_ids), **pending.edges.get(tenant, {})}
            unresolved += [e for e in edge_ids if e not in known]
            pending.add(tenant, {u for e in edge_ids if e in known for u in known[e]}, True)
        if unresolved:
            self.model.answers.flush(f"{len(unresolved)} retracted edges this cache never saw")
            return
        dropped = sum(
            self.model.answers.invalidate_evidence(tenant, urns, pending.recent.get(tenant, False))
            for tenant, urns in pending.urns.items()
        )
        if dropped:
            touched = sum(len(u) for u in pending.urns.values())
            log.info(
                "cache: %d cached answers dropped, their evidence changed (%d urns)",
                dropped,
                touched,
            )

    def _apply_invalidation(self, envelope: EventEnvelope) -> None:
        p = envelope.payload
        scope = parse_scope(str(p["scope"]))
        answers = self.model.answers.flush(p.get("reason") or "invalidated") if scope.answers else 0
        embeddings = 0
        if scope.embeddings and self.model.embeddings is not None:
            embeddings = self.model.embeddings.forget()
        details = {
            "scope": scope.value,
            "reason": p.get("reason", ""),
            "actor": p.get("actor", ""),
            "position": envelope.position,
            "at": envelope.timestamp,
            "answers_deleted": answers,
            "embeddings_deleted": embeddings,
        }
        self.model.answers.record_invalidation(details)
        log.info(
            "caches invalidated at position %d (scope %s, by %s: %s): %d answers and %d "
            "embeddings deleted",
            envelope.position,
            scope.value,
            details["actor"],
            details["reason"] or "no reason given",
            answers,
            embeddings,
        )

    def _is_recent(self, envelope: EventEnvelope) -> bool:
        """Only events of the last few minutes can race an answer being computed."""
        try:
            recorded = datetime.fromisoformat(envelope.timestamp)
        except ValueError:
            return True
        if recorded.tzinfo is None:
            recorded = recorded.replace(tzinfo=UTC)
        age = (self.clock() - recorded).total_seconds()
        return age <= float(self.model.answers.quiet_s)


class _Pending:
    """What a batch of ingestion events touched, per tenant, applied together."""

    def __init__(self) -> None:
        self.urns: dict[str, set[str]] = {}
        self.recent: dict[str, bool] = {}
        self.edges: dict[str, dict[str, tuple[str, str]]] = {}
        self.retracted: dict[str, list[str]] = {}

    def add(self, tenant: str, urns: Any, recent: bool) -> None:
        self.urns.setdefault(tenant, set()).update(urns)
        self.recent[tenant] = self.recent.get(tenant, False) or recent

    def add_retracted(self, tenant: str, edge_ids: Sequence[str]) -> None:
        self.retracted.setdefault(tenant, []).extend(edge_ids)
