"""The cache commands and their handler (a mixin for `UpstreamApplication`).

`InvalidateCache(scope)` arrives on `cmd.cache.invalidate` or `POST /api/v1/cache/invalidate`
and records `CachesInvalidated` on the `Cache` ledger; the cache projection applies it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import IntegrityError
from pydantic import Field

from commands.models import Command, CommandResult
from domain.cache import Cache, parse_scope

if TYPE_CHECKING:
    from eventsourcing.application import Application

    _Base = Application[Any]
else:
    _Base = object

log = logging.getLogger(__name__)

_ATTEMPTS = 3


class InvalidateCache(Command):
    """Empty caches: `answers` (exact `query:*` and semantic `query_cache`), `embeddings`, or
    `all`."""

    scope: str = Field(default="answers", description='"answers" (default), "embeddings" or "all"')
    reason: str = Field(default="", description="Why (kept in the event for the audit trail)")
    actor: str = "api"


class CacheCommands(_Base):
    """Handler of `InvalidateCache`, against `repository` and `save`."""

    def invalidate_cache(self, cmd: InvalidateCache) -> CommandResult:
        scope = parse_scope(cmd.scope)
        for attempt in range(_ATTEMPTS):
            try:
                return self._record_invalidation(scope, cmd)
            except IntegrityError:  # another invalidation was recorded first: count again
                log.info("concurrent cache invalidation, retrying (%d)", attempt + 1)
        return self._record_invalidation(scope, cmd)

    def _record_invalidation(self, scope: Any, cmd: InvalidateCache) -> CommandResult:
        ledger_id = Cache.create_id()
        ledger: Cache = self.repository.get(ledger_id) if ledger_id in self.repository else Cache()
        ledger.invalidate(scope, cmd.reason, cmd.actor)
        recordings = self.save(ledger)
        return CommandResult(
            accepted=True,
            aggregate_id=str(ledger.id),
            position=max(r.notification.id for r in recordings),
            changed=True,
        )
