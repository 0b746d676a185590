"""Ports of the caches: a key-value store (Redis, or an in-process TTL cache) and the vector
index of cached questions (`query_cache` in Qdrant).

Both degrade instead of failing: a store that cannot reach its server answers like an empty
cache (misses, nothing written) and says so in `status()`, so every path works uncached.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class KeyValueStore(Protocol):
    """Bytes under string keys with a TTL, sets and hashes; every key gets the store's prefix.

    `shared` is True when every process sees the same entries (Redis), False for an
    in-process cache. Operations never raise for an unreachable server: reads miss, writes are
    dropped, and `available()` turns False until the server answers again; then the callbacks
    given to `on_recovery` run once."""

    backend: str
    shared: bool

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The values of `keys` in order (None for a miss), in one round trip."""

    def set_many(self, items: Mapping[str, bytes], ttl_s: float | None) -> None:
        """Write every item with the TTL (None: no expiry), in one round trip."""

    def delete(self, keys: Sequence[str]) -> int: ...

    def delete_matching(self, pattern: str) -> int:
        """Delete the keys matching the glob `pattern` by scanning (never KEYS)."""

    def count_matching(self, pattern: str) -> int: ...

    def add_to_sets(self, keys: Sequence[str], member: str, ttl_s: float) -> None:
        """Add `member` to the set at each of `keys` and (re)set their TTL, in one round
        trip."""

    def take_members(self, keys: Sequence[str]) -> list[str]:
        """The members of the sets at `keys` (all of them), deleting those sets."""

    def hash_set(self, key: str, mapping: Mapping[str, str]) -> None: ...

    def hash_get(self, key: str, fields: Sequence[str]) -> list[str | None]: ...

    def available(self) -> bool:
        """False during an outage (after a failed call, until one succeeds)."""

    def probe(self) -> bool:
        """Try the server now if an outage retry is due; return `available()`."""

    def on_recovery(self, callback: Callable[[], None]) -> None: ...

    def status(self) -> dict[str, Any]:
        """Backend, availability, outage start and memory use, for health and status."""

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class CachedQuestion:
    """One point of the `query_cache` collection found by a similarity search."""

    point_id: str
    score: float
    payload: dict[str, Any]


@runtime_checkable
class QueryVectorCache(Protocol):
    """Question embeddings of cached answers (`query_cache`), searched by cosine similarity.

    Payload: `redis_key`, `timestamp`, `tenant_id`, `project_id`, `intent`, `partition` (the
    hash of every field an answer depends on besides the question), `question` and
    `evidence_urns`."""

    def upsert(self, point_id: str, vector: Sequence[float], payload: Mapping[str, Any]) -> None:
        """Store or replace one point (the collection is created, or recreated for another
        dimension, on the way)."""

    def search(
        self, vector: Sequence[float], partition: str, min_score: float, limit: int
    ) -> list[CachedQuestion]:
        """The closest points of one partition scoring at least `min_score`, best first."""

    def delete(self, point_ids: Sequence[str]) -> None: ...

    def delete_older_than(self, timestamp: float) -> None: ...

    def truncate(self) -> None:
        """Remove every point."""

    def count(self) -> int: ...

    def close(self) -> None: ...
