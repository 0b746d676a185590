"""The built-in RAG provider: this process's own collections, embedder and cross-encoder."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bus.collection_subjects import CMD_COLLECTION_EMPTY
from commands.collections import EmptyCollection, removed_count
from domain.ports import RerankDocument
from domain.rag_provider import Capability, ProviderHealth, RagProvider
from domain.rerank import document_text
from domain.where_filter import parse_where


class BuiltinConfig(BaseModel):
    """Configuration of the built-in provider (everything has a default)."""

    model_config = ConfigDict(extra="forbid")

    tenant_id: str = Field(
        default="default",
        min_length=1,
        max_length=128,
        description="The tenant whose collections this connection reads and writes",
    )
    wait: bool = Field(
        default=True, description="Writes return once the read models have applied them"
    )


class BuiltinRagProvider(RagProvider):
    """Collections, filtered queries and reranking of this service, without a network hop.

    `context` is the bootstrap container: `collections` (the read model), `embedder`,
    `reranker` (None when disabled), `command_bus` and `wait_for` (writes)."""

    name = "builtin"
    title = "upstream (this service)"
    description = (
        "This service's own collections in Qdrant: metadata filters, similarity queries, "
        "query texts embedded with the service's model, and its cross-encoder when loaded."
    )
    config_model = BuiltinConfig
    capabilities = frozenset(Capability)

    @property
    def settings(self) -> BuiltinConfig:
        config: BuiltinConfig = self.config  # type: ignore[assignment]
        return config

    async def health_check(self) -> ProviderHealth:
        try:
            details = await asyncio.to_thread(self._details)
        except Exception as error:
            return ProviderHealth.checked(
                "unhealthy", {}, f"collections unavailable: {type(error).__name__}: {error}"
            )
        return ProviderHealth.checked("healthy", details)

    def _details(self) -> dict[str, Any]:
        store = self.context.collections
        found = store.list_collections(self.settings.tenant_id)
        reranker = getattr(self.context, "reranker", None)
        return {
            "tenant_id": self.settings.tenant_id,
            "collection_count": len(found),
            "document_count": sum(int(c["count"]) for c in found),
            "storage_size_bytes": store.storage_bytes(),
            "backend": "qdrant-server" if store.is_server else "qdrant-local",
            "embedding_model": self.context.embedder.model_name,
            "cross_encoder": (
                {"model": reranker.model_name, "status": "loaded"} if reranker else None
            ),
            "rerank_available": reranker is not None,
        }

    async def list_collections(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await self._read("list_collections", self.settings.tenant_id)
        return found

    async def get_collection(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await self._read("get_collection", name, self.settings.tenant_id)
        return found

    async def documents(
        self, name: str, where: Any = None, limit: int = 100, offset: int = 0
    ) -> dict[str, Any]:
        tree = parse_where(where)
        page: dict[str, Any] = await self._read(
            "documents", name, tree, limit, offset, self.settings.tenant_id
        )
        return page

    async def metadata_values(self, name: str, field_name: str) -> dict[str, Any]:
        values: dict[str, Any] = await self._read(
            "metadata_values", name, field_name, self.settings.tenant_id
        )
        return values

    async def query(
        self,
        name: str,
        *,
        embedding: list[float] | None = None,
        text: str | None = None,
        where: Any = None,
        top_k: int = 10,
    ) -> dict[str, Any]:
        tree = parse_where(where)
        store = self.context.collections

        def run() -> dict[str, Any]:
            found: dict[str, Any] = store.query(
                name,
                embedding=embedding,
                text=text,
                embedder=self.context.embedder if embedding is None else None,
                where=tree,
                top_k=top_k,
                tenant_id=self.settings.tenant_id,
            )
            return found

        return await asyncio.to_thread(run)

    async def empty_collection(self, name: str) -> dict[str, Any]:
        """The same command and answer as `DELETE /collections/{name}/documents/all`."""
        command = EmptyCollection(
            tenant_id=self.settings.tenant_id, name=name, actor=f"provider:{self.name}"
        )
        result = await self.context.command_bus.send(CMD_COLLECTION_EMPTY, command)
        waited = bool(self.settings.wait and result.position)
        if waited:
            await self.context.wait_for(result.position)
        return {
            "status": "emptied",
            "collection": name,
            "count_deleted": removed_count(result),
            "position": result.position,
            "waited": waited,
        }

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = await asyncio.to_thread(
            self.context.embedder.embed, list(texts)
        )
        return vectors

    async def _rerank_unavailable(self) -> str | None:
        if getattr(self.context, "reranker", None) is None:
            return "cross-encoder not loaded in this service"
        return None

    async def _rerank(
        self, query: str, documents: list[dict[str, Any]], top_k: int | None
    ) -> list[dict[str, Any]]:
        candidates = [RerankDocument(id=d["id"], text=document_text(d)) for d in documents]
        ranked = await asyncio.to_thread(self.context.reranker.rerank, query, candidates, top_k)
        return [{"id": r.id, "score": r.score, "original_rank": r.original_rank} for r in ranked]

    async def _read(self, method: str, *args: Any) -> Any:
        return await asyncio.to_thread(getattr(self.context.collections, method), *args)
