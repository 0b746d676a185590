"""RAG providers (rag-providers.md, PRV-01, PRV-02, PRV-09.7, PRV-12.3, PRV-14): discovery,
selection with a configuration, health, and the collections API and reranking through a
configured connection (`builtin`, or another upstream instance over HTTP).

An error answer of a remote service is handed back with its status and body unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from adapters.rag.upstream_http import RemoteServiceError
from api.deps import ContainerDep
from domain.rag_provider import RagProvider

router = APIRouter(prefix="/api/v1/providers", tags=["providers"])


class SelectIn(BaseModel):
    config: dict[str, Any] | None = Field(
        default=None, description="The configuration to validate (the provider's schema)"
    )


class ProviderQueryIn(BaseModel):
    query_embedding: list[float] | None = None
    query_text: str | None = None
    where: Any = None
    top_k: int = Field(default=10, ge=1, le=1000)


class ProviderRerankIn(BaseModel):
    query: str = Field(min_length=1)
    documents: list[dict[str, Any]] = Field(description="Any fields; `text` is what is read")
    top_k: int | None = Field(default=None, ge=1)


def _connection(container: Any, name: str) -> RagProvider:
    provider: RagProvider = container.rag_providers.get(name)
    return provider


async def _relayed(call: Awaitable[Any]) -> Any:
    try:
        return await call
    except RemoteServiceError as error:
        return JSONResponse(error.body, status_code=error.status)


@router.get("")
async def list_providers(container: ContainerDep) -> dict[str, Any]:
    """Every registered provider with its capabilities and configuration schema, and the
    configured connections."""
    connections = container.rag_providers
    providers = connections.registry.describe()
    for provider in providers:
        provider["connections"] = [
            c["name"] for c in connections.describe() if c["provider"] == provider["name"]
        ]
    return {
        "providers": providers,
        "connections": connections.describe(),
        "count": len(providers),
    }


@router.get("/{name}")
async def describe_provider(name: str, container: ContainerDep) -> dict[str, Any]:
    """A provider (or a connection's provider): capabilities and configuration schema."""
    connections = container.rag_providers
    if name in connections.names():
        provider = connections.get(name)
        return {**provider.describe(), "connection": name, "config": provider.public_config()}
    described: dict[str, Any] = connections.registry.get(name).describe()
    return described


@router.post("/{name}/select")
async def select_provider(name: str, body: SelectIn, container: ContainerDep) -> dict[str, Any]:
    """Load provider `name` with `config` (validated against its schema; without one, the
    configured connection) and check its health; nothing is kept."""
    connections = container.rag_providers
    if body.config is None and name in connections.names():
        provider = connections.get(name)
        health = await provider.health_check()
    else:
        provider = connections.select(name, body.config)
        try:
            health = await provider.health_check()
        finally:
            await provider.aclose()
    return {
        "provider": provider.name,
        "capabilities": provider.capability_flags(),
        "config": provider.public_config(),
        "health": health.to_dict(),
    }


@router.get("/{name}/health")
async def provider_health(name: str, container: ContainerDep) -> dict[str, Any]:
    """The connection's standard health: status, timestamp, error, details."""
    health = await _connection(container, name).health_check()
    return health.to_dict()


@router.get("/{name}/collections")
async def provider_collections(name: str, container: ContainerDep) -> Any:
    """The connection's collections."""
    found = await _relayed(_connection(container, name).list_collections())
    if isinstance(found, JSONResponse):
        return found
    return {"collections": found, "count": len(found)}


@router.get("/{name}/collections/{collection}")
async def provider_collection(name: str, collection: str, container: ContainerDep) -> Any:
    """One collection of the connection."""
    return await _relayed(_connection(container, name).get_collection(collection))


@router.get("/{name}/collections/{collection}/documents")
async def provider_documents(
    name: str,
    collection: str,
    container: ContainerDep,
    where: Annotated[str | None, Query(description="A JSON metadata filter")] = None,
    limit: Annotated[int, Query(description="Page size, at most 1000")] = 100,
    offset: Annotated[int, Query(description="Documents to skip")] = 0,
) -> Any:
    """Documents matching a metadata filter, through the connection."""
    provider = _connection(container, name)
    return await _relayed(provider.documents(collection, where, limit, offset))


@router.get("/{name}/collections/{collection}/metadata-values")
async def provider_metadata_values(
    name: str,
    collection: str,
    container: ContainerDep,
    field: Annotated[str | None, Query(description="The metadata field")] = None,
) -> Any:
    """Distinct values of a metadata field, through the connection."""
    provider = _connection(container, name)
    return await _relayed(provider.metadata_values(collection, field or ""))


@router.post("/{name}/collections/{collection}/query")
async def provider_query(
    name: str, collection: str, body: ProviderQueryIn, container: ContainerDep
) -> Any:
    """Nearest documents through the connection (embedding, or text where it can embed)."""
    provider = _connection(container, name)
    return await _relayed(
        provider.query(
            collection,
            embedding=body.query_embedding,
            text=body.query_text,
            where=body.where,
            top_k=body.top_k,
        )
    )


@router.delete("/{name}/collections/{collection}/documents/all")
async def provider_empty_collection(name: str, collection: str, container: ContainerDep) -> Any:
    """Empty a collection through the connection; the answer is the service's own."""
    return await _relayed(_connection(container, name).empty_collection(collection))


@router.post("/{name}/rerank")
async def provider_rerank(name: str, body: ProviderRerankIn, container: ContainerDep) -> Any:
    """The provider's `rerank()`: documents reranked with every field kept, or unchanged
    (`reranked: false` and the reason) when its reranker is absent, unreachable or failing."""
    outcome = await _connection(container, name).rerank_outcome(
        body.query, body.documents, body.top_k
    )
    return {"documents": outcome.documents, "reranked": outcome.applied, "reason": outcome.reason}
