"""The semantic cache's `query_cache` collection in Qdrant (local mode in its own folder, or a
server): one point per cached answer, the question's embedding with the answer's Redis key.

The collection is created on first write with the vectors' dimension (cosine distance), and
created again, empty, when a write brings another dimension (the embedding model changed:
the cached questions are not comparable any more).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient, models

from domain.cache_ports import CachedQuestion

log = logging.getLogger(__name__)

COLLECTION = "query_cache"
_KEYWORDS = ("partition", "tenant_id", "project_id", "intent", "redis_key")


class QdrantQueryCache:
    """`QueryVectorCache` on Qdrant. Give a `path` (local mode: Qdrant locks the folder, so
    it must be the cache's own), a `url` (server), or `location=":memory:"` (tests)."""

    def __init__(
        self,
        *,
        path: Path | None = None,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        collection: str = COLLECTION,
    ) -> None:
        if sum(x is not None for x in (path, url, location)) != 1:
            raise ValueError("give exactly one of path (local mode), url (server) or location")
        self.collection = collection
        self._path = path
        self._url = url
        self._api_key = api_key
        self._location = location
        self._client: QdrantClient | None = None
        self._lock = threading.RLock()
        self._dimension: int | None = None

    @property
    def client(self) -> QdrantClient:
        with self._lock:
            if self._client is None:
                if self._path is not None:
                    self._path.mkdir(parents=True, exist_ok=True)
                    self._client = QdrantClient(path=str(self._path))
                elif self._url is not None:
                    self._client = QdrantClient(url=self._url, api_key=self._api_key, timeout=10)
                else:
                    self._client = QdrantClient(location=self._location)
            return self._client

    def _existing_dimension(self) -> int | None:
        if self._dimension is None and self.client.collection_exists(self.collection):
            params = self.client.get_collection(self.collection).config.params.vectors
            self._dimension = params.size if isinstance(params, models.VectorParams) else None
        return self._dimension

    def _ensure(self, dimension: int) -> None:
        existing = self._existing_dimension()
        if existing == dimension:
            return
        if existing is not None:
            log.info(
                "query_cache holds %d-d questions, new ones are %d-d: emptied",
                existing,
                dimension,
            )
            self.client.delete_collection(self.collection)
        self.client.create_collection(
            self.collection,
            vectors_config=models.VectorParams(size=dimension, distance=models.Distance.COSINE),
        )
        if self._url is not None:  # local mode has no payload indexes
            for name in _KEYWORDS:
                self.client.create_payload_index(
                    self.collection, name, models.PayloadSchemaType.KEYWORD
                )
            self.client.create_payload_index(
                self.collection, "timestamp", models.PayloadSchemaType.FLOAT
            )
        self._dimension = dimension

    def upsert(self, point_id: str, vector: Sequence[float], payload: Mapping[str, Any]) -> None:
        with self._lock:
            self._ensure(len(vector))
            point = models.PointStruct(id=point_id, vector=list(vector), payload=dict(payload))
            self.client.upsert(self.collection, [point], wait=True)

    def search(
        self, vector: Sequence[float], partition: str, min_score: float, limit: int
    ) -> list[CachedQuestion]:
        with self._lock:
            if self._existing_dimension() != len(vector):
                return []
            condition = models.FieldCondition(
                key="partition", match=models.MatchValue(value=partition)
            )
            response = self.client.query_points(
                self.collection,
                query=list(vector),
                query_filter=models.Filter(must=[condition]),
                limit=limit,
                score_threshold=min_score,
                with_payload=True,
            )
        return [
            CachedQuestion(str(p.id), float(p.score), dict(p.payload or {}))
            for p in response.points
        ]

    def delete(self, point_ids: Sequence[str]) -> None:
        if not point_ids:
            return
        with self._lock:
            if self._existing_dimension() is None:
                return
            selector = models.PointIdsList(points=list(point_ids))
            self.client.delete(self.collection, points_selector=selector, wait=True)

    def delete_older_than(self, timestamp: float) -> None:
        with self._lock:
            if self._existing_dimension() is None:
                return
            condition = models.FieldCondition(key="timestamp", range=models.Range(lt=timestamp))
            selector = models.FilterSelector(filter=models.Filter(must=[condition]))
            self.client.delete(self.collection, points_selector=selector, wait=True)

    def truncate(self) -> None:
        with self._lock:
            if self.client.collection_exists(self.collection):
                self.client.delete_collection(self.collection)
            self._dimension = None

    def count(self) -> int:
        with self._lock:
            if self._existing_dimension() is None:
                return 0
            return int(self.client.count(self.collection, exact=True).count)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
