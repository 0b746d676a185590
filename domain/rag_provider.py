"""RAG providers: the interface every provider implements and the registry that finds them
(rag-providers.md, PRV-01 and PRV-02; PRV-14 for `rerank()`).

A provider is a class that declares a `name`, a pydantic `config_model` (its configuration
schema, exported as JSON Schema by `get_connection_schema()`) and the `capabilities` it
supports. Defining a concrete subclass registers it (`__init_subclass__`), so a new provider
becomes discoverable once its module is imported; `RagProviderRegistry.discover()` takes every
provider defined so far. `load()` validates a configuration against the schema and builds the
provider, with clear errors for an unknown name or a bad configuration.

Every provider answers the same health shape (`status`, `timestamp`, `error`, `details` such
as the collection count and storage size) and the same `rerank()`: ids are filled in for
documents without one, and when the reranker is absent, unreachable or failing the documents
come back unchanged (logged, never raised).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, SecretStr, ValidationError

from domain.errors import InvalidCommand, UpstreamError, _register
from domain.rerank import apply_reranking, with_fallback_ids

log = logging.getLogger("upstream.rag_providers")


class Capability(StrEnum):
    """What a provider can do; a UI shows or hides features after these."""

    COLLECTIONS = "collections"
    SEARCH = "search"
    EMBEDDINGS = "embeddings"
    METADATA_FILTERING = "metadata_filtering"
    RERANK = "rerank"


# -- errors ---------------------------------------------------------------------------------
class UnknownRagProvider(UpstreamError):
    """No provider (or configured connection) of this name. HTTP 404."""

    code = "unknown_rag_provider"
    hint = "GET /api/v1/providers lists the providers and their connections."


class InvalidProviderConfig(InvalidCommand):
    """A configuration the provider's schema refuses. HTTP 400."""

    code = "invalid_provider_config"
    hint = "GET /api/v1/providers/{name} shows the provider's configuration schema."


class ProviderNotConfigured(InvalidCommand):
    """A provider that needs configuration nobody gave. HTTP 400."""

    code = "provider_not_configured"
    hint = (
        'Configure it in UPSTREAM_RAG_PROVIDERS, e.g. {"upstream_http": {"base_url": '
        '"http://other-host:8000"}}, or test a configuration with POST '
        "/api/v1/providers/{name}/select."
    )


class CapabilityNotSupported(InvalidCommand):
    """An operation the provider does not declare. HTTP 400."""

    code = "capability_not_supported"
    hint = "GET /api/v1/providers shows each provider's capabilities."


class ProviderRequestFailed(UpstreamError):
    """The provider's service failed or could not be reached. HTTP 502."""

    code = "provider_request_failed"
    hint = "Check the provider's health at GET /api/v1/providers/{name}/health."


_register(
    UnknownRagProvider,
    InvalidProviderConfig,
    ProviderNotConfigured,
    CapabilityNotSupported,
    ProviderRequestFailed,
)


# -- health -----------------------------------------------------------------------------------
HealthStatus = Literal["healthy", "degraded", "unhealthy"]


@dataclass(frozen=True)
class ProviderHealth:
    """The standard health of a provider: status, when it was checked, what went wrong, and
    service-specific details (collection count, storage size, cross-encoder...)."""

    status: HealthStatus
    timestamp: str
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def checked(
        cls, status: HealthStatus, details: dict[str, Any], error: str | None = None
    ) -> ProviderHealth:
        return cls(status, datetime.now(UTC).isoformat(), error, details)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "timestamp": self.timestamp,
            "error": self.error,
            "details": self.details,
        }


@dataclass(frozen=True)
class RerankOutcome:
    """What `rerank()` returned and whether the reranker was actually used (and why not)."""

    documents: list[dict[str, Any]]
    applied: bool
    reason: str | None = None


# -- the interface ----------------------------------------------------------------------------
_DISCOVERED: dict[str, type[RagProvider]] = {}


class RagProvider:
    """Base of every RAG provider. Subclasses set the class attributes and override the
    operations of their capabilities (the others answer `CapabilityNotSupported`)."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    description: ClassVar[str] = ""
    config_model: ClassVar[type[BaseModel]]
    capabilities: ClassVar[frozenset[Capability]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            _DISCOVERED[cls.name] = cls  # a provider registers itself when it is defined

    def __init__(self, config: Mapping[str, Any] | BaseModel | None = None, context: Any = None):
        """Validate `config` against the schema; `context` is the process's services (the
        bootstrap container) for providers that use them."""
        self.config = self.validate_config(config)
        self.context = context

    # -- schema and capabilities ------------------------------------------------------------
    @classmethod
    def get_connection_schema(cls) -> dict[str, Any]:
        """The configuration's JSON Schema."""
        return cls.config_model.model_json_schema()

    @classmethod
    def validate_config(cls, config: Mapping[str, Any] | BaseModel | None) -> BaseModel:
        if isinstance(config, cls.config_model):
            return config
        raw = config.model_dump() if isinstance(config, BaseModel) else dict(config or {})
        try:
            return cls.config_model.model_validate(raw)
        except ValidationError as error:
            raise InvalidProviderConfig(
                f"invalid configuration for provider {cls.name!r}: {_problems(error)}"
            ) from error

    @classmethod
    def capability_flags(cls) -> dict[str, bool]:
        return {c.value: c in cls.capabilities for c in Capability}

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {
            "name": cls.name,
            "title": cls.title or cls.name,
            "description": cls.description,
            "capabilities": cls.capability_flags(),
            "config_schema": cls.get_connection_schema(),
        }

    def public_config(self) -> dict[str, Any]:
        """The configuration with secrets masked."""
        return {
            k: ("***" if isinstance(getattr(self.config, k, None), SecretStr) and v else v)
            for k, v in self.config.model_dump(mode="json").items()
        }

    def _not_implemented(self, operation: str) -> CapabilityNotSupported:
        """A provider that declares a capability but lacks one of its operations: a clear
        400 naming both, never a bare NotImplementedError (a 500)."""
        return CapabilityNotSupported(f"provider {self.name!r} does not implement {operation}")

    def require(self, capability: Capability) -> None:
        if capability not in self.capabilities:
            raise CapabilityNotSupported(
                f"provider {self.name!r} does not support {capability.value}"
            )

    # -- operations (override those of the declared capabilities) ---------------------------
    async def health_check(self) -> ProviderHealth:
        raise self._not_implemented("health_check")

    async def list_collections(self) -> list[dict[str, Any]]:
        self.require(Capability.COLLECTIONS)
        raise self._not_implemented("list_collections")

    async def get_collection(self, name: str) -> dict[str, Any]:
        self.require(Capability.COLLECTIONS)
        raise self._not_implemented("get_collection")

    async def documents(
        self, name: str, where: Any = None, limit: int = 100, offset: int = 0
    ) -> dict[str, Any]:
        self.require(Capability.METADATA_FILTERING)
        raise self._not_implemented("documents")

    async def metadata_values(self, name: str, field_name: str) -> dict[str, Any]:
        self.require(Capability.METADATA_FILTERING)
        raise self._not_implemented("metadata_values")

    async def query(
        self,
        name: str,
        *,
        embedding: list[float] | None = None,
        text: str | None = None,
        where: Any = None,
        top_k: int = 10,
    ) -> dict[str, Any]:
        self.require(Capability.SEARCH)
        raise self._not_implemented("query")

    async def empty_collection(self, name: str) -> dict[str, Any]:
        self.require(Capability.COLLECTIONS)
        raise self._not_implemented("empty_collection")

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.require(Capability.EMBEDDINGS)
        raise self._not_implemented("embed")

    async def aclose(self) -> None:
        """Release connections (called when the process stops)."""

    # -- reranking, with graceful degradation --------------------------------------------------
    async def rerank(
        self, query: str, documents: Sequence[Mapping[str, Any]], top_k: int | None = None
    ) -> list[dict[str, Any]]:
        """The documents reranked by the cross-encoder, every field kept; unchanged when the
        reranker is absent, unreachable or failing."""
        return (await self.rerank_outcome(query, documents, top_k)).documents

    async def rerank_outcome(
        self, query: str, documents: Sequence[Mapping[str, Any]], top_k: int | None = None
    ) -> RerankOutcome:
        unchanged = [dict(d) for d in documents]
        if not documents:
            return RerankOutcome(unchanged, False, "no documents")
        if Capability.RERANK not in self.capabilities:
            return self._degraded(unchanged, f"provider {self.name!r} cannot rerank")
        prepared = with_fallback_ids(documents)
        try:
            reason = await self._rerank_unavailable()
        except Exception as error:
            return self._degraded(unchanged, f"reranker unreachable: {_describe(error)}")
        if reason is not None:
            return self._degraded(unchanged, reason)
        try:
            reranked = await self._rerank(query, prepared, top_k)
        except Exception as error:
            log.error("provider %s: rerank failed, documents kept in order: %s", self.name, error)
            return RerankOutcome(unchanged, False, f"rerank failed: {_describe(error)}")
        return RerankOutcome(apply_reranking(prepared, reranked), True)

    def _degraded(self, documents: list[dict[str, Any]], reason: str) -> RerankOutcome:
        log.warning("provider %s: %s; documents kept in order", self.name, reason)
        return RerankOutcome(documents, False, reason)

    async def _rerank_unavailable(self) -> str | None:
        """Why reranking cannot be used now (None when it can); raising means unreachable."""
        return "no reranker"

    async def _rerank(
        self, query: str, documents: list[dict[str, Any]], top_k: int | None
    ) -> list[dict[str, Any]]:
        """`[{id, score, original_rank}]` best first, for documents that all have ids."""
        raise self._not_implemented("rerank")


def _describe(error: Exception) -> str:
    if isinstance(error, UpstreamError):
        return error.message
    return f"{type(error).__name__}: {error}"


def _problems(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}" for e in error.errors()
    )


# -- the registry -------------------------------------------------------------------------------
class RagProviderRegistry:
    """The providers a process knows, by name."""

    def __init__(self, providers: Sequence[type[RagProvider]] = ()) -> None:
        self._providers: dict[str, type[RagProvider]] = {}
        for provider in providers:
            self.register(provider)

    @classmethod
    def discover(cls) -> RagProviderRegistry:
        """Every provider class defined (imported) so far."""
        return cls(list(_DISCOVERED.values()))

    def register(self, provider: type[RagProvider]) -> type[RagProvider]:
        if not provider.name or not isinstance(getattr(provider, "config_model", None), type):
            raise TypeError(f"{provider.__name__} must declare a name and a config_model")
        unknown = set(provider.capabilities) - set(Capability)
        if unknown:
            raise TypeError(f"{provider.__name__} declares unknown capabilities {unknown}")
        self._providers[provider.name] = provider
        return provider

    def names(self) -> list[str]:
        return sorted(self._providers)

    def get(self, name: str) -> type[RagProvider]:
        try:
            return self._providers[name]
        except KeyError:
            raise UnknownRagProvider(
                f"no RAG provider named {name!r}; known: {', '.join(self.names()) or 'none'}"
            ) from None

    def describe(self) -> list[dict[str, Any]]:
        return [self._providers[n].describe() for n in self.names()]

    def load(
        self, name: str, config: Mapping[str, Any] | None = None, context: Any = None
    ) -> RagProvider:
        """The provider `name` built with `config` (validated against its schema)."""
        return self.get(name)(config, context)
