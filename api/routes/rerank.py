"""`POST /rerank` (rag-providers.md, PRV-13) and the curated reranker list.

The cross-encoder is the container's `reranker` (None when the service started without one).
A request the schema refuses is a 400 here, as the spec asks (the rest of the API says 422).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from api.deps import ContainerDep
from domain.errors import InvalidCommand
from domain.ports import RerankDocument
from domain.rerank import (
    CROSS_ENCODER_NOT_LOADED,
    CURATED_MODELS,
    HUB_URL,
    USE_CASES,
    CrossEncoderNotLoaded,
)


class InvalidRerankRequest(InvalidCommand):
    code = "invalid_rerank_request"
    hint = (
        'Send {"query": "...", "documents": [{"id": "1", "text": "..."}], "top_k": 3} '
        "(top_k optional)."
    )


class BadRequestOnInvalidBody(APIRoute):
    """Answers a request the schema refuses with 400 (`InvalidRerankRequest`), not 422."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as error:
                raise InvalidRerankRequest(f"invalid rerank request: {_problems(error)}") from None

        return route


def _problems(error: RequestValidationError) -> str:
    parts = []
    for e in error.errors():
        where = ".".join(str(p) for p in e["loc"] if p != "body") or "body"
        message = "is required" if e["type"] == "missing" else e["msg"]
        parts.append(f"{where} {message}")
    return "; ".join(parts)


router = APIRouter(tags=["rerank"], route_class=BadRequestOnInvalidBody)


class RerankDocumentIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str | int = Field(description="Returned as given")
    text: str = Field(description="What the cross-encoder reads")


class RerankIn(BaseModel):
    query: str = Field(description="The question the documents should answer")
    documents: list[RerankDocumentIn] = Field(description="The candidates, in their current order")
    top_k: int | None = Field(default=None, ge=1, description="Return only the best top_k")


@router.post("/rerank")
async def rerank(body: RerankIn, container: ContainerDep) -> dict[str, Any]:
    """Score every document against the query with the cross-encoder; best first, each with
    its `score` and 1-based `original_rank`, cut to `top_k`."""
    reranker = getattr(container, "reranker", None)
    if reranker is None:
        raise CrossEncoderNotLoaded(CROSS_ENCODER_NOT_LOADED)
    if not body.documents:
        return {"reranked": []}
    candidates = [RerankDocument(id=str(d.id), text=d.text) for d in body.documents]
    ranked = await asyncio.to_thread(reranker.rerank, body.query, candidates, body.top_k)
    return {
        "reranked": [
            {
                "id": body.documents[r.original_rank - 1].id,
                "score": r.score,
                "original_rank": r.original_rank,
            }
            for r in ranked
        ]
    }


@router.get("/api/v1/reranker-models")
async def reranker_models(container: ContainerDep) -> dict[str, Any]:
    """The curated cross-encoders (what `--list-reranker-models` prints) and the one loaded."""
    reranker = getattr(container, "reranker", None)
    return {
        "loaded": reranker.model_name if reranker is not None else None,
        "groups": [
            {
                "use_case": case,
                "title": title,
                "models": [m.to_dict() for m in CURATED_MODELS if m.use_case == case],
            }
            for case, title in USE_CASES
        ],
        "note": "Any Hugging Face cross-encoder model works, not only these.",
        "hub_url": HUB_URL,
    }
