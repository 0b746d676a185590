"""Protocols for every outside system the domain and the read side depend on.

Adapters in `adapters/` implement them; contract suites in `tests/contract/` run against the
in-memory fakes and every real adapter alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from domain.envelope import EventEnvelope


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of a fixed dimension, in input order."""

    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def warm_up(self) -> None:
        """Load the model; called once at start-up, never at import."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True, slots=True)
class VectorPoint:
    """One vector with its id and payload, as stored in a vector index."""

    id: str
    vector: list[float]
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class VectorHit:
    id: str
    score: float
    payload: dict[str, Any]


@runtime_checkable
class VectorIndex(Protocol):
    """The chunk vectors read model, with its projection checkpoint stored beside it."""

    def ensure(self, dimension: int, model_name: str) -> None:
        """Create the collection if it is missing; refuse a dimension or model mismatch."""

    def upsert(self, points: Sequence[VectorPoint]) -> None: ...

    def delete_where(self, field_name: str, value: str, keep_ids: Sequence[str] = ()) -> None:
        """Delete the points whose payload `field_name` equals `value`, except `keep_ids`."""

    def search(
        self,
        vector: Sequence[float],
        limit: int,
        filters: dict[str, str] | None = None,
        access_tags: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        """The `limit` closest points whose payload equals every `filters` value.

        `access_tags` (the caller's tags): a point is visible when it carries no `tags` or
        shares one with them; None means no tag check (maintenance, never a caller's query).
        """

    def find_where(self, field_name: str, value: str) -> list[VectorPoint]:
        """The points whose payload `field_name` equals `value`, with their vectors."""

    def count(self) -> int: ...

    def optimize(self) -> None:
        """Ask the backend to optimise (rebuild segments and the HNSW graph) now."""

    def stats(self) -> dict[str, Any]:
        """Vector count, memory/disk use and index settings, as the backend reports them."""

    def dump(self) -> list[VectorPoint]:
        """Every point, sorted by id (for comparing a rebuilt read model with a live one)."""

    def drop(self) -> None:
        """Remove every point and the checkpoint (before a rebuild)."""

    def checkpoint(self, name: str) -> int:
        """The last applied event position of projection `name` (0 when none)."""

    def save_checkpoint(self, name: str, position: int) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Projection(Protocol):
    """A read model fed by events, in position order, skipping what it has already applied."""

    name: str

    def position(self) -> int:
        """The last event position applied to the read model."""

    def process(self, envelopes: Sequence[EventEnvelope]) -> None:
        """Apply `envelopes` (in order) and record the last position with the read model.

        Envelopes at or below `position()` are skipped. On failure raise: the runtime retries
        the same envelopes and never skips one.
        """

    def reset(self) -> None:
        """Drop the read model and its checkpoint, ready for a rebuild from position 0."""


@runtime_checkable
class EventLog(Protocol):
    """Reads the event store's total order (the notification log)."""

    def read(self, after: int, limit: int) -> list[EventEnvelope]: ...

    def max_position(self) -> int: ...


@dataclass(frozen=True, slots=True)
class RerankDocument:
    """A document to rerank: its id and the text the cross-encoder reads."""

    id: str
    text: str


@dataclass(frozen=True, slots=True)
class RerankedDocument:
    """A reranked document: its id, the model's score and its 1-based rank in the input."""

    id: str
    score: float
    original_rank: int


@runtime_checkable
class Reranker(Protocol):
    """Scores how well each document answers a query (a cross-encoder), best first."""

    @property
    def model_name(self) -> str:
        """The model's name or local path, as reported by /health."""

    def warm_up(self) -> None:
        """Load the model; raises `CrossEncoderLoadFailed` when it cannot be loaded."""

    def rerank(
        self, query: str, documents: Sequence[RerankDocument], top_k: int | None = None
    ) -> list[RerankedDocument]:
        """Every document scored against the query, sorted by score descending, cut to
        `top_k`; raises `RerankScoringFailed` when the model fails."""
