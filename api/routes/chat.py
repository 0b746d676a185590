"""The chat endpoints: POST /api/chat/{intent} and its SSE twin /api/chat/{intent}/stream."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sse_starlette.sse import EventSourceResponse

from api.deps import ContainerDep
from api.errors import error_payload
from domain.answering.intents import Intent
from queries.chat import ChatQuery

log = logging.getLogger("upstream.api.chat")

router = APIRouter(prefix="/api/chat", tags=["chat"])


class HistoryMessage(BaseModel):
    role: Literal["user", "assistant", "system"]
    content: str = Field(max_length=20_000)


class ChatRequest(BaseModel):
    """Only `query` is required."""

    query: str = Field(min_length=1, max_length=8000)
    project_id: str | None = None
    tenant_id: str = "default"
    user_tags: list[str] = Field(default_factory=list, max_length=100)
    chat_history: list[HistoryMessage] = Field(default_factory=list, max_length=200)
    skip_memory: bool = False
    model: str | None = Field(default=None, description="A configured model id to try first")
    top_k: int | None = Field(default=None, ge=1, le=50)
    topic: str | None = Field(
        default=None, max_length=2000, description="metadata.topic of the previous answer"
    )
    pipeline: str | None = Field(default=None, description="A retrieval pipeline (see /health)")
    rerank: bool = Field(
        default=False, description="Order the chunks with the cross-encoder, when one is loaded"
    )

    def to_query(self, intent: Intent) -> ChatQuery:
        return ChatQuery(
            query=self.query,
            intent=intent,
            project_id=self.project_id,
            tenant_id=self.tenant_id,
            user_tags=tuple(self.user_tags),
            chat_history=tuple((m.role, m.content) for m in self.chat_history),
            skip_memory=self.skip_memory,
            model=self.model,
            top_k=self.top_k,
            topic=self.topic,
            pipeline=self.pipeline,
            rerank=self.rerank,
        )


class EvidenceOut(BaseModel):
    type: str
    id: str
    note: str = ""


class ChatResponse(BaseModel):
    answer: str
    evidence: list[EvidenceOut]
    next_actions: list[str]
    warnings: list[str]
    model: str
    metadata: dict[str, Any]


def _register(intent: Intent) -> None:
    path = f"/{intent.value}"

    async def answer(body: ChatRequest, container: ContainerDep) -> JSONResponse:
        result = await container.chat.answer(body.to_query(intent))
        return JSONResponse(result.body, headers=result.headers)

    async def stream(body: ChatRequest, container: ContainerDep) -> EventSourceResponse:
        query = body.to_query(intent)
        headers = await container.chat.precheck(query)  # bad input: an HTTP error, no stream
        return EventSourceResponse(_events(container, query), ping=15, headers=headers)

    answer.__name__ = f"chat_{intent.value}"
    stream.__name__ = f"chat_{intent.value}_stream"
    router.add_api_route(
        path,
        answer,
        methods=["POST"],
        response_model=ChatResponse,
        summary=f"Answer a question ({intent.value})",
    )
    router.add_api_route(
        f"{path}/stream",
        stream,
        methods=["POST"],
        summary=f"Answer a question ({intent.value}), streamed as server-sent events",
        response_class=EventSourceResponse,
    )


async def _events(container: Any, query: ChatQuery) -> AsyncIterator[dict[str, str]]:
    try:
        async for event in container.chat.stream(query):
            yield {"event": event["event"], "data": json.dumps(event["data"], ensure_ascii=False)}
    except Exception as error:  # the stream is open: report the error as an event, then close
        log.warning("chat stream failed: %s", error, exc_info=not _expected(error))
        status, payload = error_payload(error)
        yield {"event": "error", "data": json.dumps({"status": status, **payload})}


def _expected(error: Exception) -> bool:
    from domain.errors import UpstreamError

    return isinstance(error, UpstreamError)


for _intent in Intent:
    _register(_intent)
