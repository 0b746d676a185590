"""In-memory adapters for unit tests; the contract suites prove the real ones behave the same."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from typing import Any

from domain.ports import VectorHit, VectorPoint

_WORD = re.compile(r"[A-Za-z0-9_]+")


class HashingEmbedder:
    """Deterministic bag-of-words vectors: texts sharing words are close. No model needed."""

    def __init__(self, dimension: int = 64, model_name: str = "hashing-test") -> None:
        self._dimension = dimension
        self._model_name = model_name
        self.calls = 0
        self.texts_embedded = 0

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def dimension(self) -> int:
        return self._dimension

    def warm_up(self) -> None:
        return None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.texts_embedded += len(texts)
        return [self._vector(t) for t in texts]

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self._dimension
        for word in _WORD.findall(text.lower()):
            digest = hashlib.md5(word.encode()).digest()
            vector[int.from_bytes(digest[:4], "big") % self._dimension] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]


class InMemoryVectorIndex:
    """A dict of points; cosine similarity by brute force."""

    def __init__(self) -> None:
        self.points: dict[str, VectorPoint] = {}
        self.checkpoints: dict[str, int] = {}
        self.model: tuple[int, str] | None = None

    def ensure(self, dimension: int, model_name: str) -> None:
        if self.model is not None and self.model != (dimension, model_name):
            from adapters.qdrant_index import EmbeddingModelMismatch

            raise EmbeddingModelMismatch(
                f"index holds {self.model[0]}-d vectors of {self.model[1]!r}, "
                f"embedder is {model_name!r} ({dimension}-d)"
            )
        self.model = (dimension, model_name)

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        for point in points:
            self.points[point.id] = point

    def delete_where(self, field_name: str, value: str, keep_ids: Sequence[str] = ()) -> None:
        keep = set(keep_ids)
        for pid in [
            pid
            for pid, p in self.points.items()
            if p.payload.get(field_name) == value and pid not in keep
        ]:
            del self.points[pid]

    def search(
        self,
        vector: Sequence[float],
        limit: int,
        filters: dict[str, str] | None = None,
        access_tags: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        wanted = filters or {}
        hits = [
            VectorHit(p.id, _cosine(vector, p.vector), p.payload)
            for p in self.points.values()
            if all(p.payload.get(k) == v for k, v in wanted.items())
            and _visible(p.payload.get("tags"), access_tags)
        ]
        return sorted(hits, key=lambda h: (-h.score, h.id))[:limit]

    def find_where(self, field_name: str, value: str) -> list[VectorPoint]:
        return [p for p in self.points.values() if p.payload.get(field_name) == value]

    def count(self) -> int:
        return len(self.points)

    def optimize(self) -> None:
        self.optimized = getattr(self, "optimized", 0) + 1

    def stats(self) -> dict[str, Any]:
        return {
            "vectors": len(self.points),
            "bytes": sum(8 * len(p.vector) for p in self.points.values()),
        }

    def dump(self) -> list[VectorPoint]:
        return [self.points[k] for k in sorted(self.points)]

    def drop(self) -> None:
        self.points.clear()
        self.checkpoints.clear()

    def checkpoint(self, name: str) -> int:
        return self.checkpoints.get(name, 0)

    def save_checkpoint(self, name: str, position: int) -> None:
        self.checkpoints[name] = position

    def close(self) -> None:
        return None


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a)) or 1.0
    nb = math.sqrt(sum(y * y for y in b)) or 1.0
    return dot / (na * nb)


def _visible(tags: Any, access_tags: Sequence[str] | None) -> bool:
    if access_tags is None or not tags:
        return True
    return bool(set(tags) & set(access_tags))
