"""Key-value stores for the caches: Redis (`REDIS_URL`), or an in-process TTL cache.

Both implement `domain.cache_ports.KeyValueStore` and put `prefix` before every key (tests use
a unique prefix each, so they never see each other's keys). The Redis store degrades instead of
failing: when the server is unreachable, reads miss and writes are dropped, a warning is logged
once per outage, calls skip the network until the next retry is due (`retry_interval_s`), and
the first call that succeeds again ends the outage and runs the recovery callbacks.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

log = logging.getLogger(__name__)

T = TypeVar("T")
_SCAN_BATCH = 1000


def redact_url(url: str) -> str:
    """The URL without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + netloc))


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RedisStore:
    """`KeyValueStore` on Redis; shared by every process that uses the same server and prefix."""

    backend = "redis"
    shared = True

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "",
        timeout_s: float = 0.5,
        retry_interval_s: float = 1.0,
        client: Any = None,
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.retry_interval_s = retry_interval_s
        self._timeout_s = timeout_s
        self._client = client
        self._state = threading.Lock()
        self._down_since: float | None = None
        self._retry_at = 0.0
        self._last_error: str | None = None
        self._outages = 0
        self._callbacks: list[Callable[[], None]] = []

    @property
    def client(self) -> Any:
        if self._client is None:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            self._client = redis.Redis.from_url(
                self.url,
                socket_connect_timeout=self._timeout_s,
                socket_timeout=self._timeout_s,
                retry=Retry(NoBackoff(), 1),  # one retry replaces a connection Redis closed
            )
        return self._client

    # -- degradation --------------------------------------------------------------------------
    def _run(self, action: Callable[[Any], T], default: T) -> T:
        if self._down_since is not None and time.monotonic() < self._retry_at:
            return default
        import redis

        try:
            result = action(self.client)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as error:
            self._enter_outage(error)
            return default
        if self._down_since is not None:
            self._recover()
        return result

    def _enter_outage(self, error: Exception) -> None:
        with self._state:
            self._retry_at = time.monotonic() + self.retry_interval_s
            self._last_error = f"{type(error).__name__}: {error}"
            if self._down_since is not None:
                return
            self._down_since = time.time()
            self._outages += 1
        log.warning(
            "redis at %s is unreachable (%s): caches are off, every request runs uncached "
            "until it is back",
            redact_url(self.url),
            self._last_error,
        )

    def _recover(self) -> None:
        with self._state:
            if self._down_since is None:
                return
            seconds = time.time() - self._down_since
            self._down_since = None
        log.warning("redis at %s is back after %.1f s: caches on", redact_url(self.url), seconds)
        for callback in list(self._callbacks):
            try:
                callback()
            except Exception as error:  # a recovery step must not break the request
                log.warning("cache recovery step failed: %s", error)

    def available(self) -> bool:
        return self._down_since is None

    def probe(self) -> bool:
        self._run(lambda c: c.ping(), None)
        return self.available()

    def on_recovery(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    # -- operations ---------------------------------------------------------------------------
    def _k(self, key: str) -> str:
        return self.prefix + key

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        misses: list[bytes | None] = [None] * len(keys)
        return self._run(lambda c: list(c.mget([self._k(k) for k in keys])), misses)

    def set_many(self, items: Mapping[str, bytes], ttl_s: float | None) -> None:
        if not items:
            return
        px = int(ttl_s * 1000) if ttl_s is not None else None

        def write(c: Any) -> None:
            pipe = c.pipeline(transaction=False)
            for key, value in items.items():
                pipe.set(self._k(key), value, px=px)
            pipe.execute()

        self._run(write, None)

    def delete(self, keys: Sequence[str]) -> int:
        if not keys:
            return 0
        return int(self._run(lambda c: c.unlink(*[self._k(k) for k in keys]), 0))

    def _scan(self, c: Any, pattern: str) -> Iterator[bytes]:
        yield from c.scan_iter(match=_glob_escape(self.prefix) + pattern, count=_SCAN_BATCH)

    def delete_matching(self, pattern: str) -> int:
        def remove(c: Any) -> int:
            deleted, batch = 0, []
            for key in self._scan(c, pattern):
                batch.append(key)
                if len(batch) >= _SCAN_BATCH:
                    deleted += int(c.unlink(*batch))
                    batch = []
            if batch:
                deleted += int(c.unlink(*batch))
            return deleted

        return self._run(remove, 0)

    def count_matching(self, pattern: str) -> int:
        return self._run(lambda c: sum(1 for _ in self._scan(c, pattern)), 0)

    def add_to_sets(self, keys: Sequence[str], member: str, ttl_s: float) -> None:
        if not keys:
            return

        def add(c: Any) -> None:
            pipe = c.pipeline(transaction=False)
            for key in keys:
                pipe.sadd(self._k(key), member)
                pipe.pexpire(self._k(key), int(ttl_s * 1000))
            pipe.execute()

        self._run(add, None)

    def take_members(self, keys: Sequence[str]) -> list[str]:
        if not keys:
            return []

        def take(c: Any) -> list[str]:
            pipe = c.pipeline(transaction=True)
            for key in keys:
                pipe.smembers(self._k(key))
            pipe.unlink(*[self._k(k) for k in keys])
            *sets, _ = pipe.execute()
            return sorted({m.decode() for s in sets for m in s})

        return self._run(take, [])

    def hash_set(self, key: str, mapping: Mapping[str, str]) -> None:
        if mapping:
            self._run(lambda c: c.hset(self._k(key), mapping=dict(mapping)), None)

    def hash_get(self, key: str, fields: Sequence[str]) -> list[str | None]:
        if not fields:
            return []
        misses: list[str | None] = [None] * len(fields)
        raw = self._run(lambda c: list(c.hmget(self._k(key), list(fields))), None)
        if raw is None:
            return misses
        return [v.decode() if v is not None else None for v in raw]

    def status(self) -> dict[str, Any]:
        self.probe()
        info = self._run(lambda c: c.info("memory"), None)
        return {
            "backend": self.backend,
            "url": redact_url(self.url),
            "prefix": self.prefix,
            "available": self.available(),
            "down_since": self._down_since,
            "last_error": self._last_error,
            "outages": self._outages,
            "memory_bytes": int(info["used_memory"]) if info else None,
        }

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


class MemoryStore:
    """`KeyValueStore` in this process: a TTL dict with least-recently-used eviction.

    The embedded profile's fallback when REDIS_URL is unset; never unavailable."""

    backend = "memory"
    shared = False

    def __init__(
        self,
        *,
        prefix: str = "",
        max_entries: int = 50_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prefix = prefix
        self.max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._values: OrderedDict[str, tuple[float, Any]] = OrderedDict()
        self._pinned: dict[str, Any] = {}
        self.evictions = 0

    def _live(self, key: str) -> Any:
        if key in self._pinned:
            return self._pinned[key]
        entry = self._values.get(key)
        if entry is None:
            return None
        expires, value = entry
        if expires <= self._clock():
            del self._values[key]
            return None
        self._values.move_to_end(key)
        return value

    def _put(self, key: str, value: Any, ttl_s: float | None) -> None:
        """Entries without a TTL (checkpoints, the edge map) are never evicted."""
        if ttl_s is None:
            self._values.pop(key, None)
            self._pinned[key] = value
            return
        self._pinned.pop(key, None)
        self._values[key] = (self._clock() + ttl_s, value)
        self._values.move_to_end(key)
        while len(self._values) > self.max_entries:
            self._values.popitem(last=False)
            self.evictions += 1

    def _pop(self, key: str) -> Any:
        pinned = self._pinned.pop(key, None)
        entry = self._values.pop(key, None)
        return pinned if pinned is not None else entry

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        with self._lock:
            values = [self._live(self.prefix + k) for k in keys]
        return [v if isinstance(v, bytes) else None for v in values]

    def set_many(self, items: Mapping[str, bytes], ttl_s: float | None) -> None:
        with self._lock:
            for key, value in items.items():
                self._put(self.prefix + key, value, ttl_s)

    def delete(self, keys: Sequence[str]) -> int:
        with self._lock:
            return sum(self._pop(self.prefix + k) is not None for k in keys)

    def _matching(self, pattern: str) -> list[str]:
        full = self.prefix + pattern
        return [k for k in [*self._values, *self._pinned] if fnmatch.fnmatchcase(k, full)]

    def delete_matching(self, pattern: str) -> int:
        with self._lock:
            keys = self._matching(pattern)
            for key in keys:
                self._pop(key)
            return len(keys)

    def count_matching(self, pattern: str) -> int:
        with self._lock:
            return sum(self._live(k) is not None for k in self._matching(pattern))

    def add_to_sets(self, keys: Sequence[str], member: str, ttl_s: float) -> None:
        with self._lock:
            for key in keys:
                current = self._live(self.prefix + key)
                merged = (current if isinstance(current, set) else set()) | {member}
                self._put(self.prefix + key, merged, ttl_s)

    def take_members(self, keys: Sequence[str]) -> list[str]:
        with self._lock:
            taken: set[str] = set()
            for key in keys:
                value = self._live(self.prefix + key)
                if isinstance(value, set):
                    taken |= value
                self._pop(self.prefix + key)
            return sorted(taken)

    def hash_set(self, key: str, mapping: Mapping[str, str]) -> None:
        with self._lock:
            current = self._live(self.prefix + key)
            merged = {**(current if isinstance(current, dict) else {}), **mapping}
            self._put(self.prefix + key, merged, None)

    def hash_get(self, key: str, fields: Sequence[str]) -> list[str | None]:
        with self._lock:
            current = self._live(self.prefix + key)
        table = current if isinstance(current, dict) else {}
        return [table.get(f) for f in fields]

    def available(self) -> bool:
        return True

    def probe(self) -> bool:
        return True

    def on_recovery(self, callback: Callable[[], None]) -> None:
        return None  # never unavailable

    def status(self) -> dict[str, Any]:
        with self._lock:
            entries = len(self._values) + len(self._pinned)
            values = [v for _, v in self._values.values()] + list(self._pinned.values())
            size = sum(_size_of(v) for v in values)
        return {
            "backend": self.backend,
            "available": True,
            "entries": entries,
            "max_entries": self.max_entries,
            "evictions": self.evictions,
            "memory_bytes": size,
        }

    def close(self) -> None:
        return None


def _size_of(value: Any) -> int:
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, set):
        return sum(len(m) for m in value)
    if isinstance(value, dict):
        return sum(len(k) + len(v) for k, v in value.items())
    return 0
