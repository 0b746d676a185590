"""The collections API of rag-providers.md (the "RAG wrapper"), served over Qdrant collections.

Writes are commands on `cmd.collection.*`; they answer with the event position and, with
`?wait=true`, once the read models have applied it. Reads come from `container.collections`
(`adapters.qdrant_collections.QdrantCollections`), the projection's read model.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query
from pydantic import BaseModel, ConfigDict, Field

from api.deps import Actor, ContainerDep, Wait, send_command, wait_if_asked
from bus.collection_subjects import (
    CMD_COLLECTION_ADD_DOCUMENTS,
    CMD_COLLECTION_CREATE,
    CMD_COLLECTION_DELETE,
    CMD_COLLECTION_EMPTY,
    CMD_COLLECTION_UPDATE_METADATA,
)
from commands.collections import (
    AddDocuments,
    CreateCollection,
    DeleteCollection,
    EmptyCollection,
    UpdateCollectionMetadata,
    removed_count,
)
from domain.collections import InvalidCollectionMetadata
from domain.where_filter import parse_where

router = APIRouter(prefix="/collections", tags=["collections"])

Tenant = Annotated[str, Header(alias="X-Tenant-Id", description="The caller's tenant")]


class CollectionIn(BaseModel):
    name: str = Field(description="Letters, digits, '.', '_' or '-'")
    metadata: Any = Field(default=None, description="Any JSON object, stored as given")
    embedding_provider: str | None = Field(default=None, description="Kept in the metadata")
    embedding_model: str | None = Field(default=None, description="Kept in the metadata")
    dimension: int | None = Field(default=None, description="Else fixed by the first documents")


class MetadataIn(BaseModel):
    metadata: Any = Field(default=None, description="The new metadata (a JSON object)")


class DocumentsIn(BaseModel):
    documents: Any = Field(
        default=None, description="[{id?, text, metadata?, embedding: [numbers]}]"
    )


class QueryIn(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    embedding: list[Any] | None = Field(
        default=None, alias="query_embedding", description="The query's pre-computed embedding"
    )
    text: str | None = Field(
        default=None,
        alias="query_text",
        description="Embedded by the service when it has the collection's model",
    )
    where: Any = Field(default=None, description="A metadata filter (object or JSON text)")
    top_k: int = Field(default=10, alias="n_results", description="How many results")


# -- writes -----------------------------------------------------------------------------------
@router.post("", status_code=201)
async def create_collection(
    body: CollectionIn,
    container: ContainerDep,
    wait: Wait = False,
    actor: Actor = "api",
    tenant: Tenant = "default",
) -> dict[str, Any]:
    """Create a collection with its metadata (409 when the name is taken)."""
    command = CreateCollection(tenant_id=tenant, actor=actor, **body.model_dump())
    result = await send_command(container, CMD_COLLECTION_CREATE, command)
    waited = await wait_if_asked(container, result, wait)
    metadata = await _metadata(container, body.name, tenant) if waited else None
    return {
        "status": "created",
        "name": body.name,
        "collection": body.name,
        "id": result.aggregate_id,
        "metadata": metadata,
        "position": result.position,
        "waited": waited,
    }


@router.put("/{name}/metadata")
async def update_metadata(
    name: str,
    body: MetadataIn,
    container: ContainerDep,
    merge: Annotated[bool, Query(description="Merge over the current metadata")] = False,
    wait: Wait = False,
    actor: Actor = "api",
    tenant: Tenant = "default",
) -> dict[str, Any]:
    """Replace the collection's metadata, or merge the given fields over it (`?merge=true`)."""
    if body.metadata is None:
        raise InvalidCollectionMetadata('metadata is required: send {"metadata": {...}}')
    command = UpdateCollectionMetadata(
        tenant_id=tenant, name=name, metadata=body.metadata, merge=merge, actor=actor
    )
    result = await send_command(container, CMD_COLLECTION_UPDATE_METADATA, command)
    waited = await wait_if_asked(container, result, wait)
    metadata = await _metadata(container, name, tenant) if waited else None
    return {
        "status": "updated",
        "collection": name,
        "merge": merge,
        "metadata": metadata,
        "position": result.position,
        "waited": waited,
    }


@router.post("/{name}/documents")
async def add_documents(
    name: str,
    body: DocumentsIn,
    container: ContainerDep,
    wait: Wait = False,
    actor: Actor = "api",
    tenant: Tenant = "default",
) -> dict[str, Any]:
    """Store documents with their pre-computed embeddings (400 when any is missing)."""
    command = AddDocuments(tenant_id=tenant, name=name, documents=body.documents, actor=actor)
    result = await send_command(container, CMD_COLLECTION_ADD_DOCUMENTS, command)
    waited = await wait_if_asked(container, result, wait)
    return {
        "status": "success",
        "collection": name,
        "count": len(body.documents),
        "position": result.position,
        "waited": waited,
    }


@router.delete("/{name}/documents/all")
async def empty_collection(
    name: str,
    container: ContainerDep,
    wait: Wait = False,
    actor: Actor = "api",
    tenant: Tenant = "default",
) -> dict[str, Any]:
    """Delete every document of a collection; the collection and its metadata stay."""
    command = EmptyCollection(tenant_id=tenant, name=name, actor=actor)
    result = await send_command(container, CMD_COLLECTION_EMPTY, command)
    waited = await wait_if_asked(container, result, wait)
    return {
        "status": "emptied",
        "collection": name,
        "count_deleted": removed_count(result),
        "position": result.position,
        "waited": waited,
    }


@router.delete("/{name}")
async def delete_collection(
    name: str,
    container: ContainerDep,
    wait: Wait = False,
    actor: Actor = "api",
    tenant: Tenant = "default",
) -> dict[str, Any]:
    """Delete a collection and its documents."""
    command = DeleteCollection(tenant_id=tenant, name=name, actor=actor)
    result = await send_command(container, CMD_COLLECTION_DELETE, command)
    waited = await wait_if_asked(container, result, wait)
    return {
        "status": "deleted",
        "collection": name,
        "count_deleted": removed_count(result),
        "position": result.position,
        "waited": waited,
    }


# -- reads ------------------------------------------------------------------------------------
@router.get("")
async def list_collections(container: ContainerDep, tenant: Tenant = "default") -> dict[str, Any]:
    """Every collection with its metadata and document count."""
    collections = await _read(container, "list_collections", tenant)
    return {"collections": collections, "count": len(collections)}


@router.get("/{name}")
async def get_collection(
    name: str, container: ContainerDep, tenant: Tenant = "default"
) -> dict[str, Any]:
    """One collection: metadata, document count, dimension and embedding model."""
    found: dict[str, Any] = await _read(container, "get_collection", name, tenant)
    return found


@router.get("/{name}/documents")
async def documents(
    name: str,
    container: ContainerDep,
    where: Annotated[str | None, Query(description="A JSON metadata filter")] = None,
    limit: Annotated[int, Query(description="Page size, at most 1000")] = 100,
    offset: Annotated[int, Query(description="Documents to skip")] = 0,
    tenant: Tenant = "default",
) -> dict[str, Any]:
    """Documents matching a metadata filter, without semantic search; `total` counts them all."""
    tree = parse_where(where)
    page: dict[str, Any] = await _read(container, "documents", name, tree, limit, offset, tenant)
    return page


@router.get("/{name}/metadata-values")
async def metadata_values(
    name: str,
    container: ContainerDep,
    field: Annotated[str | None, Query(description="The metadata field")] = None,
    tenant: Tenant = "default",
) -> dict[str, Any]:
    """The distinct values of a metadata field, sorted."""
    values: dict[str, Any] = await _read(container, "metadata_values", name, field, tenant)
    return values


@router.post("/{name}/query")
async def query(
    name: str,
    container: ContainerDep,
    body: Annotated[QueryIn, Body()],
    tenant: Tenant = "default",
) -> dict[str, Any]:
    """Nearest documents to an embedding (or a text the service embeds), filtered by `where`."""
    tree = parse_where(body.where)
    embedder = getattr(container, "embedder", None) if body.embedding is None else None

    reader: Any = container  # `container.collections` is the collections read model

    def run() -> dict[str, Any]:
        found: dict[str, Any] = reader.collections.query(
            name,
            embedding=body.embedding,
            text=body.text,
            embedder=embedder,
            where=tree,
            top_k=body.top_k,
            tenant_id=tenant,
        )
        return found

    return await asyncio.to_thread(run)


# -- helpers ----------------------------------------------------------------------------------

async def _metadata(container: Any, name: str, tenant: str) -> Any:
    """The collection's metadata as the read model holds it (after a waited write)."""
    return (await _read(container, "get_collection", name, tenant))["metadata"]


async def _read(container: Any, query_name: str, *args: Any) -> Any:
    return await asyncio.to_thread(getattr(container.collections, query_name), *args)
