"""The answer caches: exact (Redis `query:*`, 1 h) and semantic (`query_cache` in Qdrant).

- Exact: the key is a SHA-256 of the normalised question and everything else an answer depends
  on (intent, project, tenant, access tags, pipeline, model chain version); an identical
  request is answered from it (`kind="exact"`, score 1.0).
- Semantic: the question's embedding is stored in `query_cache` with the answer's key; a new
  question whose embedding scores at least 0.95 (cosine) in the same partition (tenant, project,
  intent, tags, pipeline, chain version) is answered from the stored answer
  (`kind="semantic"`, the score), unless the polarity/entity guard
  (`domain.semantic_guard`) says the questions differ; hits and refusals are logged with
  their score.
- Every stored answer is indexed by its evidence URNs (`cache:urn:<tenant>|<urn>`, a chunk also
  under its file), so the cache projection drops exactly the answers whose evidence an
  ingestion event touched. An answer whose evidence was touched while it was being computed is
  not stored (`cache:touched:*` markers, `computed_at`).

Nothing here raises for an unreachable Redis or Qdrant: lookups miss, stores are dropped.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from domain.cache import evidence_keys, normalise_question
from domain.cache_ports import KeyValueStore, QueryVectorCache
from domain.semantic_guard import may_reuse_answer

log = logging.getLogger(__name__)

T = TypeVar("T")

ANSWER_TTL_S = 3600
SEMANTIC_THRESHOLD = 0.95
QUERY_PATTERN = "query:*"
INDEX_PATTERN = "cache:urn:*"
TOUCHED_PATTERN = "cache:touched:*"
FLUSHED_AT = "cache:flushed_at"
LAST_INVALIDATION = "cache:last_invalidation"
_POINT_NS = uuid.UUID("2f6d8c1a-5b4e-4a3f-9c7d-8e1f0a2b3c4d")

# Names the words of a question that are entity names for (tenant, project).
EntityLookup = Callable[[str, str | None, list[str]], Iterable[str]]


@dataclass(frozen=True)
class AnswerKey:
    """Everything a chat answer depends on besides the read models."""

    intent: str
    question: str
    project_id: str | None
    tenant_id: str
    user_tags: tuple[str, ...]
    pipeline: str
    chain_version: str

    def _fields(self, with_question: bool) -> str:
        fields: dict[str, Any] = {
            "intent": self.intent,
            "project_id": self.project_id or "",
            "tenant_id": self.tenant_id,
            "user_tags": sorted(set(self.user_tags)),
            "pipeline": self.pipeline,
            "chain_version": self.chain_version,
        }
        if with_question:
            fields["question"] = normalise_question(self.question)
        return json.dumps(fields, sort_keys=True, separators=(",", ":"))

    def exact_key(self) -> str:
        """`query:<sha256 of the normalised fields>`."""
        return "query:" + hashlib.sha256(self._fields(True).encode()).hexdigest()

    def partition(self) -> str:
        """The semantic cache's partition: every field but the question."""
        return hashlib.sha256(self._fields(False).encode()).hexdigest()


@dataclass(frozen=True)
class CachedAnswer:
    """A cached chat response and how it was found."""

    response: dict[str, Any]  # the full chat response JSON as it was returned
    kind: str  # "exact" | "semantic"
    score: float  # 1.0 for exact, the cosine similarity for semantic


def point_id(exact_key: str) -> str:
    """The `query_cache` point of an exact key (deterministic: storing again replaces it)."""
    return str(uuid.uuid5(_POINT_NS, exact_key))


def _index_key(tenant_id: str, urn: str) -> str:
    return f"cache:urn:{tenant_id}|{urn}"


def _touched_key(tenant_id: str, urn: str) -> str:
    return f"cache:touched:{tenant_id}|{urn}"


class _Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.values: dict[str, int] = {}

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self.values[name] = self.values.get(name, 0) + amount

    def get(self, name: str) -> int:
        return self.values.get(name, 0)


class AnswerCache:
    """Exact and semantic answer caches with dependency-aware invalidation.

    `lookup` and `store` are coroutines for the chat endpoints; the `*_sync` methods are what
    they run (on a small pool of their own, so a busy default pool never delays a hit) and what
    the cache projection calls."""

    def __init__(
        self,
        store: KeyValueStore,
        semantic: QueryVectorCache | None = None,
        *,
        ttl_s: float = ANSWER_TTL_S,
        threshold: float = SEMANTIC_THRESHOLD,
        candidates: int = 5,
        quiet_s: float = 120.0,
        entity_lookup: EntityLookup | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kv = store
        self.semantic = semantic
        self.ttl_s = ttl_s
        self.threshold = threshold
        self.candidates = candidates
        self.quiet_s = quiet_s
        self.entity_lookup = entity_lookup
        self.clock = clock
        self.counters = _Counters()
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="answer-cache")
        self._semantic_failing = False
        self._pruned_at = 0.0
        self._asked: OrderedDict[str, float] = OrderedDict()  # exact key -> when it missed
        self._asked_lock = threading.Lock()
        store.on_recovery(self._after_outage)

    # -- the chat endpoints' interface ------------------------------------------------------
    async def lookup(
        self, key: AnswerKey, question_vector: Sequence[float] | None
    ) -> CachedAnswer | None:
        """The cached answer for `key`: exact first, then semantic when a vector is given."""
        return await self._run(self.lookup_sync, key, question_vector)

    async def store(
        self,
        key: AnswerKey,
        question_vector: Sequence[float] | None,
        response: dict[str, Any],
        evidence_urns: Sequence[str],
        computed_at: float | None = None,
    ) -> None:
        """Cache `response` under `key` (and its vector), indexed by its evidence URNs.

        `computed_at` (epoch seconds when answering began): an answer whose evidence was
        invalidated since is not stored. Without it, the time of this key's last missed
        `lookup` counts, or else the last `quiet_s` seconds."""
        await self._run(self.store_sync, key, question_vector, response, evidence_urns, computed_at)

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, function, *args)

    # -- lookups ------------------------------------------------------------------------------
    def lookup_sync(
        self, key: AnswerKey, question_vector: Sequence[float] | None
    ) -> CachedAnswer | None:
        exact_key = key.exact_key()
        raw = self.kv.get_many([exact_key])[0]
        entry = _decode(raw)
        if entry is not None:
            self.counters.add("exact_hits")
            log.debug("exact cache hit %s", exact_key)
            return CachedAnswer(entry["response"], "exact", 1.0)
        self.counters.add("exact_misses")
        self._remember_miss(exact_key)
        if question_vector is None or self.semantic is None or not self.kv.available():
            return None
        found = self._semantic_lookup(key, question_vector)
        self.counters.add("semantic_hits" if found else "semantic_misses")
        return found

    def _semantic_lookup(self, key: AnswerKey, vector: Sequence[float]) -> CachedAnswer | None:
        assert self.semantic is not None
        try:
            candidates = self.semantic.search(
                vector, key.partition(), self.threshold, self.candidates
            )
        except Exception as error:
            self._semantic_failed("search", error)
            return None
        self._semantic_failing = False
        for candidate in candidates:
            cached_question = str(candidate.payload.get("question", ""))
            verdict = may_reuse_answer(key.question, cached_question, self._is_entity(key))
            if not verdict.allowed:
                self.counters.add("semantic_refused")
                log.info(
                    "semantic cache: %r scores %.4f against %r but is refused: %s",
                    key.question,
                    candidate.score,
                    cached_question,
                    verdict.reason,
                )
                continue
            entry = _decode(self.kv.get_many([str(candidate.payload["redis_key"])])[0])
            if entry is None:  # expired or invalidated: the point outlived its answer
                self._delete_points([candidate.point_id])
                continue
            log.info(
                "semantic cache hit: %r answered as %r (score %.4f)",
                key.question,
                cached_question,
                candidate.score,
            )
            return CachedAnswer(entry["response"], "semantic", round(candidate.score, 6))
        return None

    def _is_entity(self, key: AnswerKey) -> Callable[[list[str]], Iterable[str]] | None:
        lookup = self.entity_lookup
        if lookup is None:
            return None

        def is_entity(words: list[str]) -> Iterable[str]:
            try:
                return list(lookup(key.tenant_id, key.project_id, words))
            except Exception as error:
                log.warning("semantic cache: entity lookup failed (%s); guard by names only", error)
                return []

        return is_entity

    # -- stores -------------------------------------------------------------------------------
    def store_sync(
        self,
        key: AnswerKey,
        question_vector: Sequence[float] | None,
        response: dict[str, Any],
        evidence_urns: Sequence[str],
        computed_at: float | None = None,
    ) -> None:
        now = self.clock()
        urns = sorted(set(evidence_urns))
        exact_key = key.exact_key()
        since = computed_at if computed_at is not None else self._missed_at(exact_key, now)
        if self._invalidated_since(key.tenant_id, urns, since, now):
            self.counters.add("stores_skipped_stale")
            log.info("answer to %r not cached: its evidence changed while it was computed", key)
            return
        entry = {
            "response": response,
            "question": key.question,
            "intent": key.intent,
            "tenant_id": key.tenant_id,
            "project_id": key.project_id,
            "evidence_urns": urns,
            "stored_at": now,
        }
        self.kv.set_many({exact_key: json.dumps(entry).encode()}, self.ttl_s)
        index = sorted({_index_key(key.tenant_id, k) for u in urns for k in evidence_keys(u)})
        self.kv.add_to_sets(index, exact_key, self.ttl_s)
        if not self.kv.available():
            return  # dropped: no point for an answer that is not there
        self.counters.add("stores")
        if question_vector is not None and self.semantic is not None:
            self._store_vector(key, exact_key, question_vector, urns, now)

    def _store_vector(
        self, key: AnswerKey, exact_key: str, vector: Sequence[float], urns: list[str], now: float
    ) -> None:
        assert self.semantic is not None
        payload = {
            "redis_key": exact_key,
            "timestamp": now,
            "tenant_id": key.tenant_id,
            "project_id": key.project_id or "",
            "intent": key.intent,
            "partition": key.partition(),
            "question": key.question,
            "evidence_urns": urns,
        }
        try:
            self.semantic.upsert(point_id(exact_key), vector, payload)
            if now - self._pruned_at > 60:
                self.semantic.delete_older_than(now - self.ttl_s)
                self._pruned_at = now
        except Exception as error:
            self._semantic_failed("store", error)

    def _remember_miss(self, exact_key: str) -> None:
        with self._asked_lock:
            self._asked[exact_key] = self.clock()
            self._asked.move_to_end(exact_key)
            while len(self._asked) > 10_000:
                self._asked.popitem(last=False)

    def _missed_at(self, exact_key: str, now: float) -> float:
        """When answering `exact_key` began: its missed lookup, else `quiet_s` ago."""
        with self._asked_lock:
            return self._asked.pop(exact_key, now - self.quiet_s)

    def _invalidated_since(self, tenant: str, urns: list[str], since: float, now: float) -> bool:
        if now - since > self.quiet_s:  # older than the markers remember: cannot tell
            return True
        keys = sorted({_touched_key(tenant, k) for u in urns for k in evidence_keys(u)})
        values = self.kv.get_many([FLUSHED_AT, *keys])
        return any(v is not None and float(v) >= since for v in values)

    # -- invalidation (the cache projection) --------------------------------------------------
    def invalidate_evidence(self, tenant_id: str, urns: Iterable[str], recent: bool = True) -> int:
        """Drop the answers citing any of `urns`; returns how many. `recent`: also mark them
        touched, so an answer being computed from the old evidence is not stored."""
        keys = sorted({k for urn in urns for k in evidence_keys(urn)})
        if not keys:
            return 0
        if recent:
            stamp = str(self.clock()).encode()
            self.kv.set_many({_touched_key(tenant_id, k): stamp for k in keys}, self.quiet_s)
        answers = self.kv.take_members([_index_key(tenant_id, k) for k in keys])
        if not answers:
            return 0
        deleted = self.kv.delete(answers)
        self._delete_points([point_id(a) for a in answers])
        self.counters.add("invalidated_answers", deleted)
        return deleted

    def flush(self, reason: str) -> int:
        """Delete every cached answer (`query:*`, their index, `query_cache`); logged."""
        self.kv.set_many({FLUSHED_AT: str(self.clock()).encode()}, None)
        deleted = self.kv.delete_matching(QUERY_PATTERN)
        self.kv.delete_matching(INDEX_PATTERN)
        if self.semantic is not None:
            try:
                self.semantic.truncate()
            except Exception as error:
                self._semantic_failed("truncate", error)
        self.counters.add("invalidated_answers", deleted)
        log.info(
            "answer caches flushed (%s): %d query:* entries deleted, query_cache truncated",
            reason,
            deleted,
        )
        return deleted

    def record_invalidation(self, details: Mapping[str, Any]) -> None:
        """Remember the last explicit invalidation (shown by /api/v1/rag/status)."""
        self.kv.set_many({LAST_INVALIDATION: json.dumps(dict(details)).encode()}, None)

    def last_invalidation(self) -> dict[str, Any] | None:
        return _decode(self.kv.get_many([LAST_INVALIDATION])[0])

    def _after_outage(self) -> None:
        self.flush("the cache store was unreachable: invalidations may have been missed")

    def _delete_points(self, ids: list[str]) -> None:
        if self.semantic is None or not ids:
            return
        try:
            self.semantic.delete(ids)
        except Exception as error:
            self._semantic_failed("delete", error)

    def _semantic_failed(self, action: str, error: Exception) -> None:
        if not self._semantic_failing:
            log.warning("semantic cache %s failed (%s): answering without it", action, error)
        self._semantic_failing = True

    # -- figures ------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """Hit/miss rates of the exact and semantic caches, entries and invalidations."""
        c = self.counters
        semantic_entries: int | None = None
        if self.semantic is not None:
            try:
                semantic_entries = self.semantic.count()
            except Exception:
                semantic_entries = None
        return {
            "exact": {
                **_rates(c.get("exact_hits"), c.get("exact_misses")),
                "entries": self.kv.count_matching(QUERY_PATTERN),
                "ttl_s": self.ttl_s,
            },
            "semantic": {
                "enabled": self.semantic is not None,
                **_rates(c.get("semantic_hits"), c.get("semantic_misses")),
                "refused_by_guard": c.get("semantic_refused"),
                "entries": semantic_entries,
                "threshold": self.threshold,
            },
            "stores": c.get("stores"),
            "stores_skipped_stale": c.get("stores_skipped_stale"),
            "invalidated_answers": c.get("invalidated_answers"),
            "last_invalidation": self.last_invalidation(),
        }

    def close(self) -> None:
        self._executor.shutdown(wait=False)
        if self.semantic is not None:
            self.semantic.close()


def _rates(hits: int, misses: int) -> dict[str, Any]:
    total = hits + misses
    return {"hits": hits, "misses": misses, "hit_rate": round(hits / total, 4) if total else 0.0}


def _decode(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
