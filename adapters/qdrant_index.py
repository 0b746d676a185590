"""The chunk vectors read model in Qdrant: local mode on disk (embedded) or a server."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient, models

from domain.errors import UpstreamError
from domain.ports import VectorHit, VectorPoint

log = logging.getLogger(__name__)

_CHECKPOINTS = "upstream_checkpoints"
_CHECKPOINT_NS = uuid.UUID("0b8e2f4a-1c3d-4e5f-8a9b-c0d1e2f3a4b5")


class EmbeddingModelMismatch(UpstreamError, RuntimeError):
    """A collection was built with another embedding model or dimension."""

    code = "embedding_model_mismatch"
    hint = (
        "The embedding model changed (EMBEDDING_SOURCE or the `embedding` model "
        "configuration): rebuild the vectors with `upstream replay vectors`, or go back to "
        "the model the collection was built with."
    )


class QdrantVectorIndex:
    """Qdrant collection of chunk vectors; the projection checkpoint lives beside it."""

    def __init__(
        self,
        collection: str,
        *,
        path: Path | None = None,
        url: str | None = None,
        api_key: str | None = None,
        hnsw_m: int = 16,
        hnsw_ef_construct: int = 100,
    ) -> None:
        if (path is None) == (url is None):
            raise ValueError("give exactly one of path (local mode) or url (server)")
        self.collection = collection
        self._path = path
        self._url = url
        self._api_key = api_key
        self._hnsw = models.HnswConfigDiff(m=hnsw_m, ef_construct=hnsw_ef_construct)
        self._client: QdrantClient | None = None
        # Local mode is not safe for concurrent use; a server is, but the lock costs nothing.
        self._lock = threading.RLock()
        self._dimension: int | None = None
        self._model_name: str | None = None

    @property
    def client(self) -> QdrantClient:
        if self._client is None:
            if self._path is not None:
                self._path.mkdir(parents=True, exist_ok=True)
                self._client = QdrantClient(path=str(self._path))
            else:
                self._client = QdrantClient(url=self._url, api_key=self._api_key, timeout=30)
        return self._client

    @property
    def hnsw(self) -> models.HnswConfigDiff:
        """The HNSW settings collections are created with (a server applies them; local mode
        searches by brute force and ignores them)."""
        return self._hnsw

    @property
    def location(self) -> str:
        return str(self._path) if self._path is not None else str(self._url)

    def ensure(self, dimension: int, model_name: str) -> None:
        with self._lock:
            self._dimension, self._model_name = dimension, model_name
            self._ensure_checkpoints()
            if self.client.collection_exists(self.collection):
                self._check_model(dimension, model_name)
                return
            self.client.create_collection(
                self.collection,
                vectors_config=models.VectorParams(size=dimension, distance=models.Distance.COSINE),
                hnsw_config=self._hnsw,
                metadata={"embedding_model": model_name, "dimension": dimension},
            )
            if self._url is None:  # local mode has no payload indexes: it scans
                log.info("created collection %s (%s, %d-d)", self.collection, model_name, dimension)
                return
            for field_name in (
                "project_id",
                "tenant_id",
                "file_urn",
                "file_key",
                "path",
                "chunk_type",
            ):
                self.client.create_payload_index(
                    self.collection, field_name, models.PayloadSchemaType.KEYWORD
                )
            log.info("created collection %s (%s, %d-d)", self.collection, model_name, dimension)

    def _check_model(self, dimension: int, model_name: str) -> None:
        info = self.client.get_collection(self.collection)
        params = info.config.params.vectors
        size = params.size if isinstance(params, models.VectorParams) else None
        metadata = getattr(info.config, "metadata", None) or {}
        stored_model = metadata.get("embedding_model", model_name)
        if size != dimension or stored_model != model_name:
            raise EmbeddingModelMismatch(
                f"collection {self.collection!r} holds {size}-d vectors of {stored_model!r}, "
                f"but the embedder is {model_name!r} ({dimension}-d). Run `upstream replay "
                "vectors` to rebuild it with the configured model."
            )

    def _ensure_checkpoints(self) -> None:
        if not self.client.collection_exists(_CHECKPOINTS):
            self.client.create_collection(
                _CHECKPOINTS,
                vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT),
            )

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        structs = [models.PointStruct(id=p.id, vector=p.vector, payload=p.payload) for p in points]
        with self._lock:
            self.client.upsert(self.collection, structs, wait=True)

    def delete_where(self, field_name: str, value: str, keep_ids: Sequence[str] = ()) -> None:
        condition = models.FieldCondition(key=field_name, match=models.MatchValue(value=value))
        must_not: list[Any] = [models.HasIdCondition(has_id=list(keep_ids))] if keep_ids else []
        selector = models.FilterSelector(filter=models.Filter(must=[condition], must_not=must_not))
        with self._lock:
            self.client.delete(self.collection, points_selector=selector, wait=True)

    def search(
        self,
        vector: Sequence[float],
        limit: int,
        filters: dict[str, str] | None = None,
        access_tags: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        query_filter = _with_access(_filter(filters), access_tags)
        with self._lock:
            if not self.client.collection_exists(self.collection):
                return []
            response = self.client.query_points(
                self.collection,
                query=list(vector),
                query_filter=query_filter,
                limit=limit,
                with_payload=True,
            )
        return [
            VectorHit(str(p.id), float(p.score), dict(p.payload or {})) for p in response.points
        ]

    def find_where(self, field_name: str, value: str) -> list[VectorPoint]:
        condition = models.FieldCondition(key=field_name, match=models.MatchValue(value=value))
        return self._scroll(models.Filter(must=[condition]))

    def _scroll(self, query_filter: models.Filter | None = None) -> list[VectorPoint]:
        points: list[VectorPoint] = []
        offset: Any = None
        with self._lock:
            if not self.client.collection_exists(self.collection):
                return []
            while True:
                batch, offset = self.client.scroll(
                    self.collection,
                    scroll_filter=query_filter,
                    limit=1000,
                    offset=offset,
                    with_vectors=True,
                )
                points.extend(
                    VectorPoint(str(p.id), list(p.vector), dict(p.payload or {}))  # type: ignore[arg-type]
                    for p in batch
                )
                if offset is None:
                    return points

    def optimize(self) -> None:
        """A server re-runs its optimisers when their config is updated; local mode has none."""
        if self._url is None:
            return
        with self._lock:
            self.client.update_collection(
                self.collection,
                optimizers_config=models.OptimizersConfigDiff(indexing_threshold=20_000),
            )

    def stats(self) -> dict[str, Any]:
        with self._lock:
            if not self.client.collection_exists(self.collection):
                return {"vectors": 0}
            info = self.client.get_collection(self.collection)
        stats: dict[str, Any] = {
            "vectors": self.count(),
            "indexed_vectors": info.indexed_vectors_count,
            "segments": info.segments_count,
            "status": str(info.status),
        }
        if self._path is not None:
            stats["disk_bytes"] = sum(
                f.stat().st_size for f in self._path.rglob("*") if f.is_file()
            )
        return stats

    def count(self) -> int:
        with self._lock:
            if not self.client.collection_exists(self.collection):
                return 0
            return int(self.client.count(self.collection, exact=True).count)

    def dump(self) -> list[VectorPoint]:
        return sorted(self._scroll(), key=lambda p: p.id)

    def drop(self) -> None:
        with self._lock:
            if self.client.collection_exists(self.collection):
                self.client.delete_collection(self.collection)
            if self.client.collection_exists(_CHECKPOINTS):
                self.client.delete_collection(_CHECKPOINTS)
            if self._dimension is not None and self._model_name is not None:
                self.ensure(self._dimension, self._model_name)

    def checkpoint(self, name: str) -> int:
        with self._lock:
            if not self.client.collection_exists(_CHECKPOINTS):
                return 0
            found = self.client.retrieve(_CHECKPOINTS, [_checkpoint_id(name)], with_payload=True)
        return int(found[0].payload["position"]) if found and found[0].payload else 0

    def save_checkpoint(self, name: str, position: int) -> None:
        point = models.PointStruct(
            id=_checkpoint_id(name), vector=[1.0], payload={"name": name, "position": position}
        )
        with self._lock:
            self._ensure_checkpoints()
            self.client.upsert(_CHECKPOINTS, [point], wait=True)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def _checkpoint_id(name: str) -> str:
    return str(uuid.uuid5(_CHECKPOINT_NS, name))


def _with_access(
    query_filter: models.Filter | None, access_tags: Sequence[str] | None
) -> models.Filter | None:
    """Add "untagged, or sharing one of the caller's tags" to the filter (Qdrant evaluates it)."""
    if access_tags is None:
        return query_filter
    visible: list[Any] = [models.IsEmptyCondition(is_empty=models.PayloadField(key="tags"))]
    if access_tags:
        visible.append(
            models.FieldCondition(key="tags", match=models.MatchAny(any=list(access_tags)))
        )
    must: list[Any] = list(query_filter.must or []) if query_filter is not None else []
    return models.Filter(must=[*must, models.Filter(should=visible)])


def _filter(filters: dict[str, str] | None) -> models.Filter | None:
    if not filters:
        return None
    return models.Filter(
        must=[
            models.FieldCondition(key=k, match=models.MatchValue(value=v))
            for k, v in filters.items()
        ]
    )
