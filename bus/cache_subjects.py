"""The caches on the bus: the invalidation command and the events other processes may follow.

- `cmd.cache.invalidate` (request-reply): an `InvalidateCache` `{"scope": "answers" |
  "embeddings" | "all", "reason": "...", "actor": "..."}`; the reply is a `CommandResult`
  with the event position.
- `events.cache.CachesInvalidated` (stream EVENTS): every explicit invalidation, payload
  `{"scope", "reason", "actor", "sequence"}`. A process holding its own caches derived from
  upstream's answers empties them on it.
- Dependency-aware invalidation needs no event of its own: a subscriber follows
  `events.source_file.{FileChunked,LineageExtracted,LineageEdgesRetracted,FileDeleted}` and
  drops what cites the URNs they touch (`domain.cache.touched_evidence`).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

CMD_CACHE_INVALIDATE = "cmd.cache.invalidate"
EVENT_CACHES_INVALIDATED = "events.cache.CachesInvalidated"


class CachesInvalidatedPayload(BaseModel):
    scope: str = Field(description='"answers" (query:* and query_cache), "embeddings" or "all"')
    reason: str = Field(description="Why, as given with the command")
    actor: str = Field(description="Who asked")
    sequence: int = Field(description="1 for the first invalidation ever, then +1 each")


class CacheLedgerOpenedPayload(BaseModel):
    """The ledger of invalidations was created (with the first invalidation)."""


CACHE_EVENT_SCHEMAS: dict[str, tuple[type[BaseModel], str]] = {
    EVENT_CACHES_INVALIDATED: (
        CachesInvalidatedPayload,
        "Caches were invalidated (InvalidateCache): the cache projection deleted query:* and "
        "truncated query_cache (scope answers/all) or emptied the embedding cache "
        "(embeddings/all). Other processes may follow it to empty their own caches.",
    ),
    "events.cache.CacheLedgerOpened": (
        CacheLedgerOpenedPayload,
        "The invalidation ledger was created, just before the first CachesInvalidated.",
    ),
}
