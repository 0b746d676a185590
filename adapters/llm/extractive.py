"""The `extractive` provider: no model, a deterministic digest of the evidence it was given.

It answers in the chat JSON shape `{answer, evidence: [{type, id, note}], next_actions,
warnings}` and never claims anything that is not in the request's evidence: it lists and
quotes what it received, in the order it received it.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from domain.llm import (
    CapabilityUnsupported,
    Completion,
    CompletionRequest,
    EvidenceItem,
)

_NOTE_CHARS = 200
_ANSWER_ITEMS = 5
_STREAM_CHUNK = 64


def _excerpt(text: str, limit: int = _NOTE_CHARS) -> str:
    """The text on one line, cut at a word boundary (a cut name would read as another one)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    if " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ;,") + " …"


def digest(question: str, evidence: Sequence[EvidenceItem]) -> dict[str, Any]:
    """The answer object for `question` built from `evidence` alone (pure, deterministic)."""
    warnings = [
        "Answered without a language model: this lists the retrieved evidence verbatim and "
        "does not interpret it."
    ]
    if not evidence:
        return {
            "answer": "No evidence was found for this question, so nothing can be stated about it.",
            "evidence": [],
            "next_actions": [
                "Ingest the repository that defines these objects, then ask again.",
                "Search with the exact table, model or file name.",
            ],
            "warnings": [*warnings, "No evidence was retrieved for this question."],
        }
    items = [{"type": item.type, "id": item.id, "note": _excerpt(item.text)} for item in evidence]
    graph = [i for i in evidence if i.type == "graph"]
    lines = [
        f"{len(evidence)} evidence item(s) were retrieved"
        + (f", {len(graph)} from the lineage graph" if graph else "")
        + ":"
    ]
    for item in evidence[:_ANSWER_ITEMS]:
        lines.append(f'- {item.id}: "{_excerpt(item.text, 160)}"')
    if len(evidence) > _ANSWER_ITEMS:
        lines.append(f"- ... and {len(evidence) - _ANSWER_ITEMS} more (see evidence).")
    next_actions = [f"Open {item.id}" for item in evidence[:3]]
    if not graph:
        warnings.append("No lineage-graph evidence was retrieved; lineage is not confirmed.")
    return {
        "answer": "\n".join(lines),
        "evidence": items,
        "next_actions": next_actions,
        "warnings": warnings,
    }


class ExtractiveProvider:
    """Always available; the last link of the `local` chain."""

    name = "extractive"

    async def complete(self, request: CompletionRequest, model: str) -> Completion:
        started = time.perf_counter()
        text = json.dumps(digest(request.question, request.evidence), ensure_ascii=False)
        return Completion(
            text=text,
            model=model or "extractive",
            provider=self.name,
            prompt_tokens=request.estimated_prompt_tokens(),
            completion_tokens=len(text) // 4,
            latency_s=time.perf_counter() - started,
        )

    async def stream(self, request: CompletionRequest, model: str) -> AsyncIterator[str]:
        text = (await self.complete(request, model)).text
        for start in range(0, len(text), _STREAM_CHUNK):
            yield text[start : start + _STREAM_CHUNK]

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        raise CapabilityUnsupported(
            "The extractive provider has no embeddings", provider=self.name, model=model
        )

    async def aclose(self) -> None:
        return None
