"""Caches as read models: what an invalidation records, and which evidence an event touches.

The caches themselves (embeddings, exact and semantic answers) live outside the domain; what
the domain owns is

- `Cache`, the aggregate whose event `CachesInvalidated(scope, reason, actor, sequence)` is
  recorded by the `InvalidateCache` command (`cmd.cache.invalidate`, `POST
  /api/v1/cache/invalidate`). Subscribers follow it on `events.cache.CachesInvalidated`.
- `touched_evidence(event_type, payload)`: the evidence URNs an ingestion event changes, so the
  cache projection drops only the cached answers that cited them (dependency-aware
  invalidation): a file's URN, its chunks' URNs and the node URNs of its lineage edges.
- `normalise_question`: the form of a question that the exact answer cache keys on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.errors import InvalidCommand, _register
from domain.urn import Urn

_NAMESPACE = UUID("0b8e6a52-1c3d-4f7e-a9b0-5d2c4e6f8a13")
_SPACES = re.compile(r"\s+")
_TRAILING_PUNCTUATION = re.compile(r"[\s?!.,;:]+$")

INGESTION_EVENTS = frozenset(
    {"FileIngested", "FileChunked", "LineageExtracted", "LineageEdgesRetracted", "FileDeleted"}
)


class CacheScope(StrEnum):
    """Which caches an invalidation empties."""

    ANSWERS = "answers"  # exact (`query:*`) and semantic (`query_cache`) answers
    EMBEDDINGS = "embeddings"  # the embedding cache (content-addressed: never stale by itself)
    ALL = "all"

    @property
    def answers(self) -> bool:
        return self in (CacheScope.ANSWERS, CacheScope.ALL)

    @property
    def embeddings(self) -> bool:
        return self in (CacheScope.EMBEDDINGS, CacheScope.ALL)


class InvalidCacheScope(InvalidCommand):
    code = "invalid_cache_scope"
    hint = 'Use scope "answers" (the default), "embeddings" or "all".'


_register(InvalidCacheScope)


def parse_scope(value: str) -> CacheScope:
    try:
        return CacheScope(value.strip().lower())
    except ValueError:
        choices = ", ".join(repr(s.value) for s in CacheScope)
        raise InvalidCacheScope(f"unknown cache scope {value!r}; choose one of {choices}") from None


class Cache(Aggregate):
    """The ledger of explicit cache invalidations (one for the whole service)."""

    @staticmethod
    def create_id() -> UUID:
        return uuid5(_NAMESPACE, "caches")

    @event("CacheLedgerOpened")
    def __init__(self) -> None:
        self.invalidations = 0

    @event("CachesInvalidated")
    def _record_invalidation(self, scope: str, reason: str, actor: str, sequence: int) -> None:
        self.invalidations = sequence

    def invalidate(self, scope: CacheScope, reason: str, actor: str) -> None:
        self._record_invalidation(scope.value, reason, actor, self.invalidations + 1)


def evidence_keys(urn: str) -> set[str]:
    """The keys an answer citing `urn` is indexed under: the urn itself, and for a chunk its
    file too, so that any new version of the file (whatever its chunks) reaches the answer."""
    keys = {urn}
    try:
        parsed = Urn.parse(urn)
    except ValueError:
        return keys
    if parsed.entity_type == "chunk":
        keys.add(str(Urn.for_file(parsed.project_id, parsed.asset_path.rsplit("#", 1)[0])))
    return keys


def normalise_question(question: str) -> str:
    """Case-folded, whitespace collapsed, trailing punctuation stripped."""
    collapsed = _SPACES.sub(" ", question.casefold()).strip()
    return _TRAILING_PUNCTUATION.sub("", collapsed)


@dataclass(frozen=True)
class TouchedEvidence:
    """What one ingestion event changes, for the answers that cited it.

    `urns` are touched outright; `retracted_edges` are edge ids whose endpoints the reader must
    resolve from the edges it remembered (`remembered_edges`: edge id -> (source, target), from
    `LineageExtracted`)."""

    tenant_id: str
    urns: frozenset[str] = frozenset()
    retracted_edges: tuple[str, ...] = ()
    remembered_edges: Mapping[str, tuple[str, str]] = field(default_factory=dict)


def touched_evidence(event_type: str, payload: Mapping[str, Any]) -> TouchedEvidence | None:
    """The evidence an ingestion event touches; None for any other event."""
    if event_type not in INGESTION_EVENTS:
        return None
    tenant = str(payload.get("tenant_id") or "default")
    urns: set[str] = set()
    file_urn = payload.get("file_urn")
    if file_urn:
        urns.add(str(file_urn))
    elif payload.get("project_id") and payload.get("path"):
        urns.add(str(Urn.for_file(str(payload["project_id"]), str(payload["path"]))))
    if event_type == "FileChunked":
        project, path = str(payload["project_id"]), str(payload["path"])
        urns.update(str(Urn.for_chunk(project, path, int(c["index"]))) for c in payload["chunks"])
    if event_type == "LineageExtracted":
        urns.update(str(n["urn"]) for n in payload["nodes"])
        edges = {str(e["edge_id"]): (str(e["source"]), str(e["target"])) for e in payload["edges"]}
        urns.update(edges)
        urns.update(urn for pair in edges.values() for urn in pair)
        return TouchedEvidence(tenant, frozenset(urns), remembered_edges=edges)
    if event_type == "LineageEdgesRetracted":
        edge_ids = tuple(str(e) for e in payload["edge_ids"])
        urns.update(edge_ids)
        return TouchedEvidence(tenant, frozenset(urns), retracted_edges=edge_ids)
    return TouchedEvidence(tenant, frozenset(urns))
