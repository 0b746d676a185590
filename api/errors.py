"""The one place where errors become HTTP responses: JSON with a message a person can act on."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from adapters.qdrant_index import EmbeddingModelMismatch
from commands.sources.git import GitCloneFailed
from domain import errors
from domain.answering.errors import MissingTemplateVariable
from domain.collections import CollectionNotFound
from domain.kg.aggregates import ProposedEdgeNotFound
from domain.llm import AllModelsFailed
from domain.model_config import ModelConfigNotFound, ModelSelectionUnavailable
from domain.rag_provider import ProviderRequestFailed, UnknownRagProvider
from domain.rerank import RerankScoringFailed
from domain.tags import TagOwnerNotFound, UnknownTag
from queries.kg import EdgeHistoryNotFound, EnrichmentRunNotFound
from queries.lineage import AmbiguousEntity, EntityNotFound

log = logging.getLogger(__name__)

_STATUS: list[tuple[type[errors.UpstreamError], int]] = [
    (MissingTemplateVariable, 500),
    (errors.ContentTooLarge, 413),
    (errors.BinaryContent, 415),
    (errors.InvalidCommand, 400),
    (errors.UnknownProjection, 404),
    (errors.NotCaughtUp, 504),
    (errors.ServiceUnavailable, 503),
    (GitCloneFailed, 502),
    (EntityNotFound, 404),
    (ModelConfigNotFound, 404),
    (CollectionNotFound, 404),
    (TagOwnerNotFound, 404),
    (UnknownTag, 404),
    (AmbiguousEntity, 409),
    (ProposedEdgeNotFound, 404),
    (EdgeHistoryNotFound, 404),
    (EnrichmentRunNotFound, 404),
    (RerankScoringFailed, 500),
    (UnknownRagProvider, 404),
    (ProviderRequestFailed, 502),
]


def status_for(error: errors.UpstreamError) -> int:
    for cls, status in _STATUS:
        if isinstance(error, cls):
            return status
    return 500 if type(error) is errors.UpstreamError else 409


def error_body(code: str, message: str, hint: str) -> dict[str, str]:
    return {"error": code, "message": message, "hint": hint}


def error_payload(error: Exception) -> tuple[int, dict[str, object]]:
    """Status and JSON body for any error (also used where no handler runs: an open stream)."""
    if isinstance(error, AllModelsFailed):
        return 503, error.body()
    if isinstance(error, ModelSelectionUnavailable):
        return 503, dict(error.body())
    if isinstance(error, errors.UpstreamError):
        return status_for(error), dict(error_body(error.code, error.message, error.detail_hint))
    return 500, dict(
        error_body(
            "internal_error",
            f"internal error: {type(error).__name__}",
            "Nothing you sent was lost; check the server log and retry.",
        )
    )


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(errors.UpstreamError)
    async def _upstream_error(_: Request, error: errors.UpstreamError) -> JSONResponse:
        body = error_body(error.code, error.message, error.detail_hint)
        return JSONResponse(body, status_code=status_for(error))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, error: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['msg']}"
            for e in error.errors()
        )
        body = error_body(
            "invalid_request", f"invalid request: {problems}", "See the API reference at /docs."
        )
        return JSONResponse(body, status_code=422)

    @app.exception_handler(EmbeddingModelMismatch)
    async def _model_mismatch(_: Request, error: EmbeddingModelMismatch) -> JSONResponse:
        body = error_body(error.code, error.message, error.detail_hint)
        return JSONResponse(body, status_code=409)

    @app.exception_handler(AllModelsFailed)
    async def _all_failed(_: Request, error: AllModelsFailed) -> JSONResponse:
        headers = {"Retry-After": str(int(error.retry_after))}
        return JSONResponse(error.body(), status_code=503, headers=headers)

    @app.exception_handler(ModelSelectionUnavailable)
    async def _no_model(_: Request, error: ModelSelectionUnavailable) -> JSONResponse:
        return JSONResponse(error.body(), status_code=503)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, error: Exception) -> JSONResponse:
        log.exception("unhandled error")
        body = error_body(
            "internal_error",
            f"internal error: {type(error).__name__}",
            "Nothing you sent was lost; check the server log and retry.",
        )
        return JSONResponse(body, status_code=500)
