"""The FastAPI application: thin routers over the bootstrap container."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from adapters.bootstrap import Container, Role, bootstrap
from adapters.settings import Settings
from api.errors import install_error_handlers
from api.routes import cache as cache_routes
from api.routes import chat, collections, health, ingest, lineage, models, search, sources
from api.routes import config as config_routes
from api.routes import kg as kg_routes
from api.routes import ollama_health as ollama_health_routes
from api.routes import providers as provider_routes
from api.routes import rerank as rerank_routes
from api.routes import tags as tag_routes
from queries.metrics import Metrics


def create_app(
    settings: Settings | None = None, role: Role = "serve", container: Container | None = None
) -> FastAPI:
    """Build the app; the container starts in the lifespan (nothing connects at import)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        built = container or bootstrap(settings or Settings(), role)
        app.state.container = built
        app.state.metrics = Metrics(built, built.metrics_registry)
        try:
            await built.start()
            yield
        finally:
            await built.stop()

    app = FastAPI(
        title="upstream",
        version="0.1.0",
        description="Answers questions about data lineage and code, with evidence.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(ingest.router)
    app.include_router(search.router)
    app.include_router(sources.router)
    app.include_router(lineage.router)
    app.include_router(models.router)
    app.include_router(ollama_health_routes.router)
    app.include_router(config_routes.router)
    app.include_router(collections.router)
    app.include_router(rerank_routes.router)
    app.include_router(provider_routes.router)
    app.include_router(cache_routes.router)
    app.include_router(chat.router)
    app.include_router(tag_routes.router)
    app.include_router(kg_routes.router)
    return app
