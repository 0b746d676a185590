"""The embedding cache: an `Embedder` that asks the wrapped one only for texts it has not seen.

Key = `embedding:` + MD5 of the model name and the text (two models never share an entry),
value = the vector as float32 bytes, TTL 24 h. One call looks every key up in one round trip
(`MGET`), sends only the misses to the wrapped embedder in sub-batches of 50 (sequentially; a
sub-batch's vectors are written back in one pipeline before the next starts), and returns the
vectors in input order. A text repeated inside one call is embedded once.

Vectors always come back as float32 values, cached or not, so a read model built from cached
vectors is identical to one built from fresh ones. A small in-process memo (`memo_size`) sits
in front of the store: within one request the same text and model is embedded once even when
Redis is down (PRV-03.5: several collections queried with one embedding).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from domain.cache_ports import KeyValueStore
from domain.ports import Embedder

log = logging.getLogger(__name__)

EMBEDDING_TTL_S = 24 * 3600
SUB_BATCH = 50
KEY_PATTERN = "embedding:*"


def embedding_key(model_name: str, text: str) -> str:
    digest = hashlib.md5(f"{model_name}\x00{text}".encode(), usedforsecurity=False).hexdigest()
    return f"embedding:{digest}"


def pack(vector: Sequence[float]) -> bytes:
    return array("f", vector).tobytes()


def unpack(data: bytes) -> list[float]:
    values = array("f")
    values.frombytes(data)
    return values.tolist()


class CachingEmbedder:
    """`Embedder` wrapping any embedder with the embedding cache; counts hits and misses."""

    def __init__(
        self,
        inner: Embedder,
        store: KeyValueStore,
        *,
        ttl_s: float = EMBEDDING_TTL_S,
        sub_batch: int = SUB_BATCH,
        memo_size: int = 2048,
    ) -> None:
        self.inner = inner
        self.store = store
        self.ttl_s = ttl_s
        self.sub_batch = sub_batch
        self.memo_size = memo_size
        self._memo: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0  # texts answered from the cache (store or memo)
        self.memo_hits = 0
        self.misses = 0  # texts sent to the wrapped embedder
        self.embedder_calls = 0  # calls to the wrapped embedder
        self.calls_saved = 0  # calls to `embed` answered without the wrapped embedder

    # -- the Embedder port --------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def warm_up(self) -> None:
        self.inner.warm_up()

    def __getattr__(self, name: str) -> Any:
        """Anything else (`count_tokens`, `max_tokens`, ...) is the wrapped embedder's."""
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self.model_name
        keys = [embedding_key(model, t) for t in texts]
        found = self._from_memo(keys)
        wanted = [k for k in dict.fromkeys(keys) if k not in found]
        if wanted:
            stored = self.store.get_many(wanted)
            for key, value in zip(wanted, stored, strict=True):
                vector = unpack(value) if value is not None else None
                if vector:
                    found[key] = vector
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        hits = sum(1 for k in keys if k not in missing)
        for batch in _batches(list(missing.items()), self.sub_batch):
            found.update(self._embed_and_store(batch))
        self._count(hits, len(missing), called=bool(missing))
        self._remember({k: found[k] for k in dict.fromkeys(keys)})
        if hits:
            log.debug("embedding cache: %d of %d texts cached (%s)", hits, len(texts), model)
        return [list(found[k]) for k in keys]

    # -- internals ----------------------------------------------------------------------------
    def _embed_and_store(self, batch: list[tuple[str, str]]) -> dict[str, list[float]]:
        vectors = self.inner.embed([text for _, text in batch])
        with self._lock:
            self.embedder_calls += 1
        packed = {key: pack(v) for (key, _), v in zip(batch, vectors, strict=True)}
        self.store.set_many(packed, self.ttl_s)
        return {key: unpack(data) for key, data in packed.items()}

    def _from_memo(self, keys: Sequence[str]) -> dict[str, list[float]]:
        if not self.memo_size:
            return {}
        with self._lock:
            found = {k: self._memo[k] for k in keys if k in self._memo}
            for key in found:
                self._memo.move_to_end(key)
            self.memo_hits += sum(1 for k in keys if k in found)
        return found

    def _remember(self, vectors: dict[str, list[float]]) -> None:
        if not self.memo_size:
            return
        with self._lock:
            for key, vector in vectors.items():
                self._memo[key] = vector
                self._memo.move_to_end(key)
            while len(self._memo) > self.memo_size:
                self._memo.popitem(last=False)

    def _count(self, hits: int, misses: int, called: bool) -> None:
        with self._lock:
            self.hits += hits
            self.misses += misses
            if not called:
                self.calls_saved += 1

    def forget(self) -> int:
        """Empty the embedding cache (store and memo); returns the entries deleted."""
        with self._lock:
            self._memo.clear()
        return self.store.delete_matching(KEY_PATTERN)

    def stats(self) -> dict[str, Any]:
        """Hit/miss counts and rates, calls to the wrapped embedder and the calls saved."""
        with self._lock:
            hits, misses = self.hits, self.misses
            figures = {
                "model": self.model_name,
                "hits": hits,
                "misses": misses,
                "hit_rate": round(hits / (hits + misses), 4) if hits + misses else 0.0,
                "memo_hits": self.memo_hits,
                "texts_embedded": misses,
                "embedder_calls": self.embedder_calls,
                "embedder_calls_saved": self.calls_saved,
                "texts_saved": hits,
                "ttl_s": self.ttl_s,
                "sub_batch": self.sub_batch,
            }
        figures["entries"] = self.store.count_matching(KEY_PATTERN)
        return figures


def _batches(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
