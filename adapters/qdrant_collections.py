"""The collections read model in Qdrant (local mode on disk, or a server).

Layout
- `col__registry`: one point per upstream collection (point id = the `Collection` aggregate id)
  whose payload is the collection's record: tenant, name, metadata, dimension, embedding model,
  `generation`, `position` (last event applied to the record) and `fields` (the metadata fields
  seen, with their value types); plus one point per projection checkpoint.
- `col_<collection id hex>_g<generation>`: the documents of one generation of a collection.
  Payload = `{"doc_id", "document", "metadata": {...}, "seq"}`; filters address
  `metadata.<field>`, so a metadata field can never collide with the document's own fields.
  `seq` (event position * 2^20 + rank) orders pages in insertion order.

Generations make emptying all-or-nothing for readers and safe across a crash. A generation is
named after the position of the event that started it (`CollectionCreated`/`Recreated` or
`CollectionEmptied`). Emptying creates the new, empty generation, then switches the record to
it (one point upsert: the reader sees the old documents or none, never part of them), then drops
the old generation. Replaying an event after a crash is harmless: a record update is skipped
when the record has already seen the event's position, documents of an event older than the
current generation are not written again (an emptying erased them), and the drop of every other
generation is repeated, so an orphan left by a crash between the switch and the drop goes away.

Filters are translated from the neutral `where` tree into a Qdrant `Filter` and evaluated by
Qdrant (`count`, `query_points`, `facet`); nothing here scans documents to filter them. On a
server, payload indexes are created for `seq`, `doc_id` and for every metadata field as it is
first seen (keyword, integer, float or bool after its first value's type), on each generation.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient, models

from domain.collections import (
    Collection,
    EmbeddingDimensionMismatch,
    InvalidDocuments,
    does_not_exist,
    not_found,
)
from domain.errors import InvalidCommand, _register
from domain.ports import Embedder
from domain.where_filter import AllOf, AnyOf, Membership, WhereNode

log = logging.getLogger(__name__)

PREFIX = "col_"
REGISTRY = "col__registry"
SEQ_SHIFT = 2**20
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_TOP_K = 1000
_CHECKPOINT_NS = uuid.UUID("6e1f0a2b-3c4d-4e5f-9a0b-1c2d3e4f5a6b")
_INDEX_TYPES: dict[str, models.PayloadSchemaType] = {
    "str": models.PayloadSchemaType.KEYWORD,
    "int": models.PayloadSchemaType.INTEGER,
    "float": models.PayloadSchemaType.FLOAT,
    "bool": models.PayloadSchemaType.BOOL,
}
_FACETABLE = {"str", "int", "bool"}


class InvalidCollectionQuery(InvalidCommand):
    """A read of a collection with bad paging, a missing field or an unusable query. HTTP 400."""

    code = "invalid_collection_query"
    hint = (
        "documents: limit 1-1000 (default 100), offset 0 or more; metadata-values: give "
        "?field=; query: give query_embeddings (or query_texts when the service can embed "
        "with the collection's model) and top_k of 1 or more."
    )


_register(InvalidCollectionQuery)


def physical_name(collection_id: str, generation: int) -> str:
    return f"{PREFIX}{uuid.UUID(collection_id).hex}_g{generation}"


def _generation_prefix(collection_id: str) -> str:
    return f"{PREFIX}{uuid.UUID(collection_id).hex}_g"


class QdrantCollections:
    """Store of the `collections` projection and the read side of the collections API."""

    def __init__(
        self,
        *,
        path: Path | None = None,
        url: str | None = None,
        api_key: str | None = None,
        client: QdrantClient | None = None,
        lock: threading.RLock | None = None,
        server: bool | None = None,
    ) -> None:
        """Give a `path` (local mode), a `url` (server) or an open `client` (with its `lock`,
        e.g. to share one local-mode directory with `QdrantVectorIndex`, which locks it; say
        `server=True` when that client talks to a server)."""
        if sum(x is not None for x in (path, url, client)) != 1:
            raise ValueError("give exactly one of path (local mode), url (server) or client")
        self._path = path
        self._url = url
        self._api_key = api_key
        self._client = client
        self._lock = lock or threading.RLock()
        self._server = (url is not None) if server is None else server

    # -- connection ---------------------------------------------------------------------------
    @property
    def client(self) -> QdrantClient:
        if self._client is None:
            if self._path is not None:
                self._path.mkdir(parents=True, exist_ok=True)
                self._client = QdrantClient(path=str(self._path))
            else:
                self._client = QdrantClient(url=self._url, api_key=self._api_key, timeout=60)
        return self._client

    @property
    def is_server(self) -> bool:
        """Local mode has no payload indexes (it scans); a server uses them."""
        return self._server

    def storage_bytes(self) -> int | None:
        """Bytes on disk in local mode; None for a server (its own metrics report them)."""
        if self._path is None or not self._path.exists():
            return None if self._path is None else 0
        return sum(f.stat().st_size for f in self._path.rglob("*") if f.is_file())

    def close(self) -> None:
        with self._lock:
            if self._client is not None and (self._path is not None or self._url is not None):
                self._client.close()
                self._client = None

    # -- projection store ---------------------------------------------------------------------
    def ensure(self) -> None:
        with self._lock:
            if not self.client.collection_exists(REGISTRY):
                self.client.create_collection(
                    REGISTRY,
                    vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT),
                )
                if self.is_server:
                    for key in ("kind", "tenant_id", "name"):
                        self.client.create_payload_index(
                            REGISTRY, key, models.PayloadSchemaType.KEYWORD
                        )

    def drop(self) -> None:
        """Every collection of this read model and the registry (a rebuild starts here)."""
        with self._lock:
            for name in self._physical_names(PREFIX):
                self.client.delete_collection(name)
            if self.client.collection_exists(REGISTRY):
                self.client.delete_collection(REGISTRY)

    def checkpoint(self, name: str) -> int:
        with self._lock:
            if not self.client.collection_exists(REGISTRY):
                return 0
            found = self.client.retrieve(REGISTRY, [_checkpoint_id(name)], with_payload=True)
        return int(found[0].payload["position"]) if found and found[0].payload else 0

    def save_checkpoint(self, name: str, position: int) -> None:
        point = models.PointStruct(
            id=_checkpoint_id(name),
            vector=[1.0],
            payload={"kind": "checkpoint", "name": name, "position": position},
        )
        with self._lock:
            self.ensure()
            self.client.upsert(REGISTRY, [point], wait=True)

    # -- records --------------------------------------------------------------------------------
    def record(self, collection_id: str) -> dict[str, Any] | None:
        with self._lock:
            if not self.client.collection_exists(REGISTRY):
                return None
            found = self.client.retrieve(REGISTRY, [collection_id], with_payload=True)
        if not found or not found[0].payload or found[0].payload.get("kind") != "collection":
            return None
        return dict(found[0].payload)

    def put_record(self, record: dict[str, Any]) -> None:
        point = models.PointStruct(id=record["id"], vector=[1.0], payload=record)
        with self._lock:
            self.client.upsert(REGISTRY, [point], wait=True)

    def delete_record(self, collection_id: str) -> None:
        with self._lock:
            self.client.delete(
                REGISTRY, points_selector=models.PointIdsList(points=[collection_id]), wait=True
            )

    # -- generations ------------------------------------------------------------------------------
    def ensure_generation(self, record: dict[str, Any]) -> str:
        """The collection's current generation, created (with its indexes) when missing."""
        name = physical_name(record["id"], int(record["generation"]))
        with self._lock:
            if self.client.collection_exists(name):
                return name
            self.client.create_collection(
                name,
                vectors_config=models.VectorParams(
                    size=int(record["dimension"]), distance=models.Distance.COSINE
                ),
            )
            if self.is_server:
                self.client.create_payload_index(
                    name,
                    "seq",
                    models.IntegerIndexParams(
                        type=models.IntegerIndexType.INTEGER, lookup=False, range=True
                    ),
                )
                self.client.create_payload_index(name, "doc_id", models.PayloadSchemaType.KEYWORD)
                self._index_fields(name, record.get("fields") or {})
        return name

    def drop_other_generations(self, collection_id: str, keep: int | None) -> None:
        keep_name = physical_name(collection_id, keep) if keep is not None else None
        with self._lock:
            for name in self._physical_names(_generation_prefix(collection_id)):
                if name != keep_name:
                    self.client.delete_collection(name)

    def upsert_documents(
        self,
        record: dict[str, Any],
        documents: Sequence[dict[str, Any]],
        position: int,
        new_fields: dict[str, str],
    ) -> None:
        name = self.ensure_generation(record)
        if new_fields and self.is_server:
            self._index_fields(name, new_fields)
        structs = [
            models.PointStruct(
                id=document_point_id(record["id"], d["id"]),
                vector=d["embedding"],
                payload={
                    "doc_id": d["id"],
                    "document": d["document"],
                    "metadata": d["metadata"],
                    "seq": position * SEQ_SHIFT + rank,
                },
            )
            for rank, d in enumerate(documents)
        ]
        with self._lock:
            storage = self._batched_local_storage(name)
            for start in range(0, len(structs), 512):
                self.client.upsert(name, structs[start : start + 512], wait=True)
            if storage is not None:  # durable before the projection records its checkpoint
                storage.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _batched_local_storage(self, name: str) -> Any:
        """Local mode commits every point on its own (an fsync each: ~1 ms a point, most of
        the time of a large upload). Its SQLite file is switched to WAL without a sync per
        commit, and `upsert_documents` syncs once per call (a WAL checkpoint) instead, so a
        batch is as durable as before when the checkpoint is saved after it. Returns the
        connection, or None on a server or when the client's internals are not as expected."""
        if self.is_server:
            return None
        local = getattr(self.client, "_client", None)
        collection = getattr(local, "collections", {}).get(name)
        storage = getattr(getattr(collection, "storage", None), "storage", None)
        if storage is None or not hasattr(storage, "execute"):
            return None
        if storage.execute("PRAGMA synchronous").fetchone()[0] != 1:  # 1 = NORMAL
            storage.execute("PRAGMA journal_mode=WAL")  # kept by the file
            storage.execute("PRAGMA synchronous=NORMAL")  # per connection
        return storage

    def _index_fields(self, name: str, fields: dict[str, Any]) -> None:
        for field, types in fields.items():
            kind = types[0] if isinstance(types, list) else types
            self.client.create_payload_index(name, f"metadata.{field}", _INDEX_TYPES[kind])

    def _physical_names(self, prefix: str) -> list[str]:
        names = [c.name for c in self.client.get_collections().collections]
        return sorted(n for n in names if n.startswith(prefix) and n != REGISTRY)

    # -- reads ------------------------------------------------------------------------------------
    def list_collections(self, tenant_id: str = "default") -> list[dict[str, Any]]:
        """Every collection of the tenant with its metadata and document count, by name."""
        query_filter = models.Filter(
            must=[_match("kind", "collection"), _match("tenant_id", tenant_id)]
        )
        records: list[dict[str, Any]] = []
        offset: Any = None
        with self._lock:
            if not self.client.collection_exists(REGISTRY):
                return []
            while True:
                batch, offset = self.client.scroll(
                    REGISTRY, scroll_filter=query_filter, limit=256, offset=offset
                )
                records.extend(dict(p.payload or {}) for p in batch)
                if offset is None:
                    break
        return [self._describe(r) for r in sorted(records, key=lambda r: r["name"])]

    def get_collection(self, name: str, tenant_id: str = "default") -> dict[str, Any]:
        return self._describe(self._require(tenant_id, name))

    def documents(
        self,
        name: str,
        where: WhereNode | None = None,
        limit: int | None = DEFAULT_LIMIT,
        offset: int = 0,
        tenant_id: str = "default",
    ) -> dict[str, Any]:
        """A page of the documents matching `where`, in insertion order; `total` is the number
        of all matches (Qdrant's exact count with the same filter). The limit is capped at 1000."""
        size = DEFAULT_LIMIT if limit is None else limit
        if size < 1:
            raise InvalidCollectionQuery(f"limit must be 1 or more, not {size}")
        if offset < 0:
            raise InvalidCollectionQuery(f"offset must be 0 or more, not {offset}")
        size = min(size, MAX_LIMIT)
        record = self._require(tenant_id, name)
        physical = physical_name(record["id"], int(record["generation"]))
        query_filter = to_qdrant_filter(where)
        with self._lock:
            if not self.client.collection_exists(physical):
                return _page([], 0, size, offset)
            total = int(self.client.count(physical, count_filter=query_filter, exact=True).count)
            if offset >= total:
                return _page([], total, size, offset)
            response = self.client.query_points(
                physical,
                query=models.OrderByQuery(order_by="seq"),
                query_filter=query_filter,
                limit=size,
                offset=offset,
                with_payload=True,
            )
        return _page([_document(p.payload or {}) for p in response.points], total, size, offset)

    def metadata_values(
        self, name: str, field: str | None, tenant_id: str = "default"
    ) -> dict[str, Any]:
        """The distinct values of a metadata field, sorted (numbers, then strings...)."""
        record = self._require(tenant_id, name, missing=does_not_exist)
        if field is None or not field.strip():
            raise InvalidCollectionQuery("field parameter is required: ?field=<metadata field>")
        physical = physical_name(record["id"], int(record["generation"]))
        types = set((record.get("fields") or {}).get(field, []))
        values: set[Any] = set()
        with self._lock:
            if types and self.client.collection_exists(physical):
                if types <= _FACETABLE:
                    values = self._facet_values(physical, field)
                else:  # floats cannot be faceted: read only that field of the holders
                    values = self._scrolled_values(physical, field)
        ordered = sorted(values, key=_sort_key)
        return {"field": field, "values": ordered, "count": len(ordered)}

    def _facet_values(self, physical: str, field: str) -> set[Any]:
        limit = 10_000
        while True:
            response = self.client.facet(physical, key=f"metadata.{field}", limit=limit, exact=True)
            if len(response.hits) < limit:
                return {hit.value for hit in response.hits}
            limit *= 10

    def _scrolled_values(self, physical: str, field: str) -> set[Any]:
        key = f"metadata.{field}"
        holders = models.Filter(
            must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key=key))]
        )
        values: set[Any] = set()
        offset: Any = None
        while True:
            batch, offset = self.client.scroll(
                physical,
                scroll_filter=holders,
                limit=1000,
                offset=offset,
                with_payload=models.PayloadSelectorInclude(include=[key]),
            )
            for point in batch:
                value = ((point.payload or {}).get("metadata") or {}).get(field)
                values.update(value if isinstance(value, list) else [value])
            if offset is None:
                return {v for v in values if v is not None}

    def query(
        self,
        name: str,
        *,
        embedding: Sequence[float] | None = None,
        text: str | None = None,
        embedder: Embedder | None = None,
        where: WhereNode | None = None,
        top_k: int = 10,
        tenant_id: str = "default",
    ) -> dict[str, Any]:
        """Nearest documents to an embedding (or to a text embedded with `embedder`, which must
        be the collection's model), among those matching `where`."""
        if isinstance(top_k, bool) or top_k < 1:
            raise InvalidCollectionQuery(f"top_k must be 1 or more, not {top_k}")
        record = self._require(tenant_id, name)
        vector = self._query_vector(record, embedding, text, embedder)
        dimension = record.get("dimension")
        if dimension is not None and len(vector) != int(dimension):
            raise EmbeddingDimensionMismatch(
                f"Embedding dimension mismatch: collection '{name}' stores {dimension}-"
                f"dimensional embeddings, the query has {len(vector)} dimensions"
            )
        physical = physical_name(record["id"], int(record["generation"]))
        with self._lock:
            if not self.client.collection_exists(physical):
                return {"collection": name, "results": [], "count": 0}
            response = self.client.query_points(
                physical,
                query=list(vector),
                query_filter=to_qdrant_filter(where),
                limit=min(top_k, MAX_TOP_K),
                with_payload=True,
            )
        results = [
            {**_document(p.payload or {}), "score": float(p.score), "distance": 1.0 - p.score}
            for p in response.points
        ]
        return {"collection": name, "results": results, "count": len(results)}

    def _query_vector(
        self,
        record: dict[str, Any],
        embedding: Sequence[float] | None,
        text: str | None,
        embedder: Embedder | None,
    ) -> list[float]:
        if embedding is not None:
            if not isinstance(embedding, list) or not embedding:
                raise InvalidDocuments(
                    "Invalid embedding format: query embedding must be a non-empty array of numbers"
                )
            if any(isinstance(x, bool) or not isinstance(x, int | float) for x in embedding):
                raise InvalidDocuments(
                    "Invalid embedding format: query embedding must be an array of numbers"
                )
            return [float(x) for x in embedding]
        if text is None or not text.strip():
            raise InvalidCollectionQuery("give query_embeddings or query_texts")
        if embedder is None:
            raise InvalidCollectionQuery(
                "this service cannot embed query texts; send query_embeddings"
            )
        model = record.get("embedding_model")
        if model and model != embedder.model_name:
            raise EmbeddingDimensionMismatch(
                f"collection '{record['name']}' holds embeddings of {model!r}, the service "
                f"embeds with {embedder.model_name!r}; send query_embeddings computed with "
                f"{model!r}"
            )
        return list(embedder.embed([text])[0])

    def _require(self, tenant_id: str, name: str, missing: Any = not_found) -> dict[str, Any]:
        record = self.record(str(Collection.create_id(tenant_id, name)))
        if record is None or record.get("tenant_id") != tenant_id:
            raise missing(name)
        return record

    def _describe(self, record: dict[str, Any]) -> dict[str, Any]:
        physical = physical_name(record["id"], int(record["generation"]))
        with self._lock:
            exists = self.client.collection_exists(physical)
            count = int(self.client.count(physical, exact=True).count) if exists else 0
        return {
            "name": record["name"],
            "id": record["id"],
            "metadata": record.get("metadata") or {},
            "count": count,
            "dimension": record.get("dimension"),
            "embedding_model": record.get("embedding_model"),
        }


def document_point_id(collection_id: str, doc_id: str) -> str:
    """Deterministic: a document id of a collection is always the same point."""
    return str(uuid.uuid5(uuid.UUID(collection_id), doc_id))


# -- where -> Qdrant ------------------------------------------------------------------------------
def to_qdrant_filter(node: WhereNode | None) -> models.Filter | None:
    """The Qdrant filter of a `where` tree (metadata fields live under `metadata.`)."""
    if node is None:
        return None
    condition = _condition(node)
    return condition if isinstance(condition, models.Filter) else models.Filter(must=[condition])


def _condition(node: WhereNode) -> Any:
    if isinstance(node, AllOf):
        return models.Filter(must=[_condition(c) for c in node.children])
    if isinstance(node, AnyOf):
        return models.Filter(should=[_condition(c) for c in node.children])
    key = f"metadata.{node.field}"
    if isinstance(node, Membership):
        match = _any_of(key, node.values)
        if not node.negate:
            return match
        return models.Filter(must=[_exists(key)], must_not=[match])
    op, value = node.op, node.value
    if op == "$eq":
        return _equals(key, value)
    if op == "$ne":
        return models.Filter(must=[_exists(key)], must_not=[_equals(key, value)])
    bound = float(value)
    ranges = {
        "$gt": models.Range(gt=bound),
        "$gte": models.Range(gte=bound),
        "$lt": models.Range(lt=bound),
        "$lte": models.Range(lte=bound),
    }
    return models.FieldCondition(key=key, range=ranges[op])


def _equals(key: str, value: Any) -> Any:
    if isinstance(value, float) and not value.is_integer():
        return models.FieldCondition(key=key, range=models.Range(gte=value, lte=value))
    if isinstance(value, float):  # 3.0 matches an integer 3 and a float 3.0
        return models.Filter(
            should=[
                models.FieldCondition(key=key, match=models.MatchValue(value=int(value))),
                models.FieldCondition(key=key, range=models.Range(gte=value, lte=value)),
            ]
        )
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def _any_of(key: str, values: Sequence[Any]) -> Any:
    if all(isinstance(v, str) for v in values):
        return models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))
    return models.Filter(should=[_equals(key, v) for v in values])


def _exists(key: str) -> models.Filter:
    return models.Filter(must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key=key))])


def _match(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def _checkpoint_id(name: str) -> str:
    return str(uuid.uuid5(_CHECKPOINT_NS, name))


def _document(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": payload.get("doc_id"),
        "text": payload.get("document", ""),
        "metadata": payload.get("metadata") or {},
    }


def _page(documents: list[dict[str, Any]], total: int, limit: int, offset: int) -> dict[str, Any]:
    return {
        "documents": documents,
        "count": len(documents),
        "total": total,
        "limit": limit,
        "offset": offset,
    }


def _sort_key(value: Any) -> tuple[int, Any]:
    if isinstance(value, bool):
        return (0, value)
    if isinstance(value, int | float):
        return (1, value)
    return (2, str(value))
