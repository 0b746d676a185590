"""The RAG provider connections of a process: which providers exist (the registry) and which
are configured (`builtin` always; others from `UPSTREAM_RAG_PROVIDERS`).

`UPSTREAM_RAG_PROVIDERS` is a JSON object: connection name -> configuration, with the provider
in `"provider"` (default: the connection's name), e.g.
`{"upstream_http": {"base_url": "http://rag-host:8000", "api_key": "..."}}` or
`{"staging": {"provider": "upstream_http", "base_url": "http://staging:8000"}}`.
A configuration the provider's schema refuses stops the start-up with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# Importing the provider modules registers the providers they define.
from adapters.rag import builtin as _builtin  # noqa: F401
from adapters.rag import upstream_http as _upstream_http  # noqa: F401
from domain.rag_provider import (
    InvalidProviderConfig,
    ProviderNotConfigured,
    RagProvider,
    RagProviderRegistry,
    UnknownRagProvider,
)


class RagProviderSettings(BaseSettings):
    """`UPSTREAM_RAG_PROVIDERS`: the configured connections (JSON)."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    providers: dict[str, dict[str, Any]] = Field(
        default_factory=dict, alias="UPSTREAM_RAG_PROVIDERS"
    )


class RagConnections:
    """Configured provider instances by connection name, built once (nothing connects until a
    provider is used)."""

    def __init__(
        self,
        registry: RagProviderRegistry,
        configured: Mapping[str, Mapping[str, Any]] | None = None,
        context: Any = None,
    ) -> None:
        self.registry = registry
        self.context = context
        self._connections: dict[str, RagProvider] = {}
        for name, raw in (configured or {}).items():
            config = dict(raw)
            provider = str(config.pop("provider", name))
            try:
                self._connections[name] = registry.load(provider, config, context)
            except (InvalidProviderConfig, UnknownRagProvider) as error:
                raise type(error)(
                    f"UPSTREAM_RAG_PROVIDERS[{name!r}]: {error.message}"
                ) from error
        for provider in registry.names():  # providers that need no configuration
            if provider not in self._connections:
                try:
                    self._connections[provider] = registry.load(provider, {}, context)
                except InvalidProviderConfig:
                    continue

    def names(self) -> list[str]:
        return sorted(self._connections)

    def get(self, name: str) -> RagProvider:
        """The configured connection `name`; clear errors for an unknown or unconfigured one."""
        found = self._connections.get(name)
        if found is not None:
            return found
        if name in self.registry.names():
            raise ProviderNotConfigured(
                f"provider {name!r} needs a configuration and has none in this service"
            )
        raise UnknownRagProvider(
            f"no RAG provider or connection named {name!r}; connections: "
            f"{', '.join(self.names()) or 'none'}; providers: {', '.join(self.registry.names())}"
        )

    def describe(self) -> list[dict[str, Any]]:
        return [
            {
                "name": name,
                "provider": p.name,
                "capabilities": p.capability_flags(),
                "config": p.public_config(),
            }
            for name, p in sorted(self._connections.items())
        ]

    def select(self, provider: str, config: Mapping[str, Any] | None) -> RagProvider:
        """A provider built with the given configuration (not kept): what a client tests
        before configuring it."""
        return self.registry.load(provider, config, self.context)

    async def aclose(self) -> None:
        for provider in self._connections.values():
            await provider.aclose()


def build_rag_connections(
    context: Any, settings: RagProviderSettings | None = None
) -> RagConnections:
    """Every provider discovered so far, and the connections the environment configures."""
    settings = settings or RagProviderSettings()
    return RagConnections(RagProviderRegistry.discover(), settings.providers, context)
