"""A RAG provider over HTTP: another upstream instance's collections API, `/health` and
`/rerank` (the spec's "RAG service" seen from its Node.js provider, PRV-12.3 and PRV-14).

Every call uses the configured timeout, sends the API key as a bearer token and the tenant as
`X-Tenant-Id`, and is retried (exponential backoff) on connection errors, timeouts, 429, 502
and 504. An error answer of the remote service is raised as `RemoteServiceError` carrying its
status and JSON body, so the API can hand it back to the caller unchanged.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, SecretStr

from domain.rag_provider import (
    Capability,
    ProviderHealth,
    ProviderRequestFailed,
    RagProvider,
)
from domain.rerank import document_text

log = logging.getLogger("upstream.rag_providers")

RETRY_STATUSES = frozenset({429, 502, 504})
_HEALTH = {"ok": "healthy", "degraded": "degraded", "down": "unhealthy"}


class RemoteServiceError(ProviderRequestFailed):
    """The remote service answered an error: its status and body are kept as they were."""

    def __init__(self, status: int, body: Any, url: str) -> None:
        message = body.get("message") if isinstance(body, dict) else None
        super().__init__(f"{url} answered {status}: {message or str(body)[:200]}")
        self.status = status
        self.body = body


class UpstreamHttpConfig(BaseModel):
    """How to reach another upstream instance."""

    model_config = ConfigDict(extra="forbid")

    base_url: AnyHttpUrl = Field(description="The instance's URL, e.g. http://rag-host:8000")
    api_key: SecretStr | None = Field(default=None, description="Sent as a bearer token")
    tenant_id: str = Field(default="default", min_length=1, description="Sent as X-Tenant-Id")
    timeout_s: float = Field(default=10.0, gt=0, le=300, description="Per request, in seconds")
    retries: int = Field(default=2, ge=0, le=5, description="Retries of a transient failure")
    retry_backoff_s: float = Field(
        default=0.2, ge=0, le=10, description="First wait before a retry (doubles each time)"
    )
    wait: bool = Field(default=True, description="Writes return once the remote applied them")


class UpstreamHttpRagProvider(RagProvider):
    """Collections, filtered queries and reranking of another upstream instance, over HTTP."""

    name = "upstream_http"
    title = "upstream over HTTP"
    description = (
        "Another upstream instance's collections API, /health and /rerank, over HTTP "
        "(timeout, bearer token, tenant header, retries)."
    )
    config_model = UpstreamHttpConfig
    capabilities = frozenset(
        {
            Capability.COLLECTIONS,
            Capability.SEARCH,
            Capability.METADATA_FILTERING,
            Capability.RERANK,
        }
    )

    def __init__(self, config: Any = None, context: Any = None) -> None:
        super().__init__(config, context)
        self._client: httpx.AsyncClient | None = None

    @property
    def settings(self) -> UpstreamHttpConfig:
        config: UpstreamHttpConfig = self.config  # type: ignore[assignment]
        return config

    @property
    def base_url(self) -> str:
        return str(self.settings.base_url).rstrip("/")

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            headers = {"Accept": "application/json", "X-Tenant-Id": self.settings.tenant_id}
            if self.settings.api_key is not None:
                headers["Authorization"] = f"Bearer {self.settings.api_key.get_secret_value()}"
            self._client = httpx.AsyncClient(
                base_url=self.base_url, headers=headers, timeout=self.settings.timeout_s
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- transport ----------------------------------------------------------------------------
    async def _send(self, method: str, path: str, **options: Any) -> httpx.Response:
        """The request, retried on transient failures; raises `ProviderRequestFailed` when
        the service cannot be reached after the retries."""
        attempts = self.settings.retries + 1
        for attempt in range(1, attempts + 1):
            try:
                response = await self.client.request(method, path, **options)
            except httpx.TransportError as error:
                if attempt == attempts:
                    raise ProviderRequestFailed(
                        f"{self.base_url} unreachable after {attempts} attempts: "
                        f"{type(error).__name__}: {error}"
                    ) from error
                log.info("%s %s%s failed (%s), retrying", method, self.base_url, path, error)
            else:
                if response.status_code not in RETRY_STATUSES or attempt == attempts:
                    return response
                log.info(
                    "%s %s%s answered %d, retrying",
                    method,
                    self.base_url,
                    path,
                    response.status_code,
                )
            await asyncio.sleep(self.settings.retry_backoff_s * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    async def _json(self, method: str, path: str, **options: Any) -> Any:
        response = await self._send(method, path, **options)
        try:
            body = response.json()
        except ValueError:
            body = {"message": response.text[:500]}
        if response.status_code >= 400:
            raise RemoteServiceError(response.status_code, body, f"{self.base_url}{path}")
        return body

    # -- operations ---------------------------------------------------------------------------
    async def health_check(self) -> ProviderHealth:
        try:
            response = await self._send("GET", "/health")
            remote = response.json()
            collections = await self._json("GET", "/collections")
        except Exception as error:
            return ProviderHealth.checked(
                "unhealthy", {"base_url": self.base_url}, _reason(error)
            )
        found = collections.get("collections", [])
        details = {
            "base_url": self.base_url,
            "remote_status": remote.get("status"),
            "remote_profile": remote.get("profile"),
            "collection_count": len(found),
            "document_count": sum(int(c.get("count", 0)) for c in found),
            "storage_size_bytes": await self._remote_storage(),
            "cross_encoder": remote.get("cross_encoder"),
            "rerank_available": "cross_encoder" in remote,
        }
        status = _HEALTH.get(str(remote.get("status")), "unhealthy")
        problem = None if status == "healthy" else f"the service reports {remote.get('status')}"
        return ProviderHealth.checked(status, details, problem)  # type: ignore[arg-type]

    async def _remote_storage(self) -> int | None:
        """The remote's own provider health reports its storage size (None if it cannot)."""
        try:
            health = await self._json("GET", "/api/v1/providers/builtin/health")
        except Exception:
            return None
        size = (health.get("details") or {}).get("storage_size_bytes")
        return int(size) if isinstance(size, int) else None

    async def list_collections(self) -> list[dict[str, Any]]:
        body = await self._json("GET", "/collections")
        found: list[dict[str, Any]] = body["collections"]
        return found

    async def get_collection(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await self._json("GET", f"/collections/{name}")
        return found

    async def documents(
        self, name: str, where: Any = None, limit: int = 100, offset: int = 0
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if where is not None:
            params["where"] = where if isinstance(where, str) else json.dumps(where)
        page: dict[str, Any] = await self._json(
            "GET", f"/collections/{name}/documents", params=params
        )
        return page

    async def metadata_values(self, name: str, field_name: str) -> dict[str, Any]:
        values: dict[str, Any] = await self._json(
            "GET", f"/collections/{name}/metadata-values", params={"field": field_name}
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
        body = {"query_embedding": embedding, "query_text": text, "where": where, "top_k": top_k}
        found: dict[str, Any] = await self._json("POST", f"/collections/{name}/query", json=body)
        return found

    async def empty_collection(self, name: str) -> dict[str, Any]:
        params = {"wait": str(self.settings.wait).lower()}
        found: dict[str, Any] = await self._json(
            "DELETE", f"/collections/{name}/documents/all", params=params
        )
        return found

    # -- reranking ----------------------------------------------------------------------------
    async def _rerank_unavailable(self) -> str | None:
        remote = (await self._send("GET", "/health")).json()
        if "cross_encoder" not in remote:
            return f"the service at {self.base_url} has no cross-encoder loaded"
        return None

    async def _rerank(
        self, query: str, documents: list[dict[str, Any]], top_k: int | None
    ) -> list[dict[str, Any]]:
        body: dict[str, Any] = {
            "query": query,
            "documents": [{"id": d["id"], "text": document_text(d)} for d in documents],
        }
        if top_k is not None:
            body["top_k"] = top_k
        reply = await self._json("POST", "/rerank", json=body)
        reranked: list[dict[str, Any]] = reply["reranked"]
        return reranked


def _reason(error: Exception) -> str:
    if isinstance(error, ProviderRequestFailed):
        return error.message
    return f"{type(error).__name__}: {error}"
