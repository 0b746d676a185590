"""Collections: named sets of documents with pre-computed embeddings (the "RAG wrapper" API).

One `Collection` aggregate per (tenant, name), id = uuid5 of both, so creating a name twice
conflicts in the store as well as in the rules. Its events:

- `CollectionCreated(name, metadata, dimension, embedding_model)`: a new collection. A name
  used again after a deletion records `CollectionRecreated` with the same fields on the same
  aggregate.
- `CollectionMetadataUpdated(metadata, merge, given)`: `metadata` is the whole new metadata
  (merged over the old one when `merge`), `given` what the client sent.
- `DocumentsAdded(documents, dimension, count)`: each document is
  `{id, document, metadata, embedding}`; an id already in the collection replaces its document.
  `dimension` is the embeddings' length (the first documents fix it when the collection was
  created without one) and `count` the number of documents after the addition.
- `CollectionEmptied(count)`: every document removed; the metadata stays.
- `CollectionDeleted(count)`.

Validation messages are the spec's (rag-providers.md), so the HTTP API answers with them.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.errors import InvalidCommand, UpstreamError, _register

_NAMESPACE = UUID("5d0c3f9e-2a41-4b7e-9f13-6c8e1d2a7b40")
_DOCUMENT_NS = UUID("a41e7c2d-93b5-4f08-8d6e-1b2c3d4e5f60")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

DOCUMENTS_REQUIRED_MESSAGE = "Documents array is required"
EMBEDDINGS_REQUIRED_MESSAGE = "All documents must include pre-computed embeddings"


# -- errors ---------------------------------------------------------------------------------
class CollectionNotFound(UpstreamError):
    """No collection of this name (or it was deleted). HTTP 404."""

    code = "collection_not_found"
    hint = "List the collections with GET /collections, or create it with POST /collections."


class CollectionExists(UpstreamError):
    """A collection of this name exists already. HTTP 409."""

    code = "collection_exists"
    hint = "Choose another name, or delete the collection first with DELETE /collections/{name}."


class InvalidCollectionName(InvalidCommand):
    code = "invalid_collection_name"
    hint = "Use 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or a digit."


class InvalidCollectionMetadata(InvalidCommand):
    code = "invalid_collection_metadata"
    hint = 'Send metadata as a JSON object, e.g. {"metadata": {"description": "Docs"}}.'


class InvalidDocuments(InvalidCommand):
    """Documents that cannot be stored (missing array, missing or bad embeddings...). HTTP 400."""

    code = "invalid_documents"
    hint = (
        'Send {"documents": [{"id": "optional", "text": "...", "metadata": {...}, '
        '"embedding": [0.1, ...]}]}; every embedding is an array of numbers of one dimension.'
    )


class EmbeddingDimensionMismatch(InvalidDocuments):
    code = "embedding_dimension_mismatch"
    hint = (
        "Embed every document of a collection with the same model: the collection records "
        "its dimension, and a request's embeddings must all have it."
    )


_register(
    CollectionNotFound,
    CollectionExists,
    InvalidCollectionName,
    InvalidCollectionMetadata,
    InvalidDocuments,
    EmbeddingDimensionMismatch,
)


def not_found(name: str) -> CollectionNotFound:
    """The spec's message for the documents routes and the others."""
    return CollectionNotFound(f"Collection '{name}' not found")


def does_not_exist(name: str) -> CollectionNotFound:
    """The spec's message for the metadata-values route."""
    return CollectionNotFound(f"Collection '{name}' does not exist.")


def already_exists(name: str) -> CollectionExists:
    return CollectionExists(f"Collection '{name}' already exists")


# -- values ---------------------------------------------------------------------------------
def validate_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidCollectionName(f"invalid collection name {name!r}")
    return name


def validate_collection_metadata(metadata: Any) -> dict[str, Any]:
    """Collection metadata is any JSON object (no provider-type validation, as the spec says)."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidCollectionMetadata("metadata must be a JSON object")
    clean: dict[str, Any] = json.loads(json.dumps(dict(metadata)))
    return clean


def create_metadata(
    metadata: Any, embedding_provider: str | None, embedding_model: str | None
) -> dict[str, Any]:
    """A new collection's metadata: the top-level embedding fields are honoured as metadata."""
    clean = validate_collection_metadata(metadata)
    if embedding_provider:
        clean["embedding_provider"] = embedding_provider
    if embedding_model:
        clean["embedding_model"] = embedding_model
    return clean


def validate_documents(
    raw: Any, collection_id: str, dimension: int | None = None, collection: str = ""
) -> tuple[list[dict[str, Any]], int]:
    """Normalised documents `{id, document, metadata, embedding}` and their dimension.

    The text is read from `text` (the spec's field) or `document`; a missing id is derived from
    the collection, the text, the metadata and the document's rank among identical ones in the
    request, so sending the same batch twice stores it once."""
    if not isinstance(raw, list) or not raw:
        raise InvalidDocuments(DOCUMENTS_REQUIRED_MESSAGE)
    if any(not isinstance(d, Mapping) or d.get("embedding") is None for d in raw):
        raise InvalidDocuments(EMBEDDINGS_REQUIRED_MESSAGE)
    documents: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    first_dim = 0
    for i, item in enumerate(raw):
        embedding = _embedding(item["embedding"], i)
        if i == 0:
            first_dim = len(embedding)
        elif len(embedding) != first_dim:
            raise EmbeddingDimensionMismatch(
                f"Embedding dimension mismatch: document at index 0 has {first_dim} dimensions, "
                f"document at index {i} has {len(embedding)}"
            )
        text = _text(item, i)
        metadata = _document_metadata(item.get("metadata"), i)
        doc_id = item.get("id")
        if doc_id is None or doc_id == "":
            digest = hashlib.sha256(
                json.dumps([text, metadata], sort_keys=True).encode()
            ).hexdigest()
            rank = seen.get(digest, 0)
            seen[digest] = rank + 1
            doc_id = str(uuid5(_DOCUMENT_NS, f"{collection_id}|{digest}|{rank}"))
        elif not isinstance(doc_id, str | int) or isinstance(doc_id, bool):
            raise InvalidDocuments(f"Invalid id for document at index {i}: must be a string")
        documents.append(
            {"id": str(doc_id), "document": text, "metadata": metadata, "embedding": embedding}
        )
    if dimension is not None and first_dim != dimension:
        raise EmbeddingDimensionMismatch(
            f"Embedding dimension mismatch: collection '{collection}' stores {dimension}-"
            f"dimensional embeddings, the documents have {first_dim} dimensions"
        )
    return documents, first_dim


def _embedding(value: Any, index: int) -> list[float]:
    if not isinstance(value, list) or not value:
        raise InvalidDocuments(
            f"Invalid embedding format for document at index {index}: embedding must be a "
            f"non-empty array of numbers, not {_kind(value)}"
        )
    vector: list[float] = []
    for j, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise InvalidDocuments(
                f"Invalid embedding format for document at index {index}: embedding must be an "
                f"array of numbers, element {j} is {x!r}"
            )
        vector.append(float(x))
    return vector


def _text(item: Mapping[str, Any], index: int) -> str:
    text = item.get("text", item.get("document"))
    if text is None:
        return ""
    if not isinstance(text, str):
        raise InvalidDocuments(f"Invalid text for document at index {index}: must be a string")
    return text


def _document_metadata(value: Any, index: int) -> dict[str, Any]:
    """Document metadata: strings, numbers, booleans, or arrays of them; nulls are dropped."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidDocuments(f"Invalid metadata for document at index {index}: must be an object")
    clean: dict[str, Any] = {}
    for key, item in value.items():
        if item is None:
            continue
        if not isinstance(key, str) or not key or key.startswith("$"):
            raise InvalidDocuments(
                f"Invalid metadata for document at index {index}: field name {key!r} must be "
                "non-empty and not start with '$'"
            )
        if _is_scalar(item) or (isinstance(item, list) and all(_is_scalar(v) for v in item)):
            clean[key] = list(item) if isinstance(item, list) else item
        else:
            raise InvalidDocuments(
                f"Invalid metadata for document at index {index}: {key!r} must be a string, a "
                "number, a boolean or an array of them"
            )
    return clean


def _is_scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str | int | bool)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an empty array"
    return type(value).__name__


# -- the aggregate --------------------------------------------------------------------------
class Collection(Aggregate):
    """A tenant's named collection: its metadata, dimension and the ids of its documents."""

    @staticmethod
    def create_id(tenant_id: str, name: str) -> UUID:
        return uuid5(_NAMESPACE, f"collection/{tenant_id}/{name}")

    @event("CollectionCreated")
    def __init__(
        self,
        tenant_id: str,
        name: str,
        metadata: dict[str, Any],
        dimension: int | None,
        embedding_model: str | None,
        actor: str,
    ) -> None:
        self._open(tenant_id, name, metadata, dimension, embedding_model)

    def _open(
        self,
        tenant_id: str,
        name: str,
        metadata: dict[str, Any],
        dimension: int | None,
        embedding_model: str | None,
    ) -> None:
        self.tenant_id = tenant_id
        self.name = name
        self.metadata = dict(metadata)
        self.dimension = dimension
        self.embedding_model = embedding_model
        self.document_ids: set[str] = set()
        self.deleted = False

    @event("CollectionRecreated")
    def _record_recreate(
        self,
        tenant_id: str,
        name: str,
        metadata: dict[str, Any],
        dimension: int | None,
        embedding_model: str | None,
        actor: str,
    ) -> None:
        self._open(tenant_id, name, metadata, dimension, embedding_model)

    @event("CollectionMetadataUpdated")
    def _record_metadata(
        self, metadata: dict[str, Any], merge: bool, given: dict[str, Any], actor: str
    ) -> None:
        self.metadata = dict(metadata)

    @event("DocumentsAdded")
    def _record_documents(
        self, documents: list[dict[str, Any]], dimension: int, count: int, actor: str
    ) -> None:
        self.dimension = dimension
        self.document_ids.update(d["id"] for d in documents)

    @event("CollectionEmptied")
    def _record_emptied(self, count: int, actor: str) -> None:
        self.document_ids = set()

    @event("CollectionDeleted")
    def _record_deleted(self, count: int, actor: str) -> None:
        self.document_ids = set()
        self.deleted = True

    # -- decisions ----------------------------------------------------------------------------
    @property
    def count(self) -> int:
        return len(self.document_ids)

    def recreate(
        self,
        metadata: dict[str, Any],
        dimension: int | None,
        embedding_model: str | None,
        actor: str,
    ) -> None:
        if not self.deleted:
            raise already_exists(self.name)
        self._record_recreate(
            self.tenant_id, self.name, metadata, dimension, embedding_model, actor
        )

    def update_metadata(self, given: Any, merge: bool, actor: str) -> None:
        clean = validate_collection_metadata(given)
        new = {**self.metadata, **clean} if merge else clean
        self._record_metadata(new, merge, clean, actor)

    def add_documents(self, raw: Sequence[Any] | Any, actor: str) -> int:
        """Validate and record the documents; returns how many were given."""
        documents, dimension = validate_documents(
            raw, str(self.id), self.dimension, collection=self.name
        )
        ids = self.document_ids | {d["id"] for d in documents}
        self._record_documents(documents, dimension, len(ids), actor)
        return len(documents)

    def empty(self, actor: str) -> int:
        count = self.count
        self._record_emptied(count, actor)
        return count

    def delete(self, actor: str) -> int:
        count = self.count
        self._record_deleted(count, actor)
        return count


def create_collection(
    existing: Collection | None,
    tenant_id: str,
    name: str,
    metadata: Mapping[str, Any] | None,
    *,
    embedding_provider: str | None = None,
    embedding_model: str | None = None,
    dimension: int | None = None,
    actor: str = "api",
) -> Collection:
    """A new collection, or a deleted one opened again; 409 when the name is in use."""
    validate_name(name)
    clean = create_metadata(metadata, embedding_provider, embedding_model)
    if dimension is not None and (isinstance(dimension, bool) or dimension < 1):
        raise InvalidCollectionMetadata(f"dimension must be a positive integer, not {dimension!r}")
    model = embedding_model or _str_or_none(clean.get("embedding_model"))
    if existing is not None:
        existing.recreate(clean, dimension, model, actor)
        return existing
    return Collection(tenant_id, name, clean, dimension, model, actor)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
