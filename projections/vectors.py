"""The vectors projection: embeds the chunks of `FileChunked` events into the vector index."""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from domain.envelope import EventEnvelope
from domain.index_tuning import recommended_hnsw, tier_of
from domain.ports import Embedder, VectorIndex, VectorPoint
from domain.repository import Repository
from domain.urn import Urn
from projections.base import CheckpointedProjection

log = logging.getLogger(__name__)

_POINT_NS = uuid.UUID("9a7b6c5d-4e3f-4a1b-8c2d-3e4f5a6b7c8d")


def point_id(tenant_id: str, chunk_urn: str) -> str:
    """Deterministic: the same chunk of the same tenant always has the same point id."""
    return str(uuid.uuid5(_POINT_NS, f"{tenant_id}|{chunk_urn}"))


def embedding_text(path: str, text: str) -> str:
    """What is embedded: the path gives the model the file's name as context."""
    return f"{path}\n{text}"


@dataclass(frozen=True, slots=True)
class _FileChunks:
    envelope: EventEnvelope
    points: list[tuple[str, str, dict[str, Any]]]  # (point id, text to embed, payload)


class VectorsProjection(CheckpointedProjection):
    """Read model `vectors`: one Qdrant point per chunk, replaced when its file changes.

    Point ids are deterministic, so a crash between the upserts and the checkpoint only
    repeats them."""

    name = "vectors"
    relevant_events = frozenset({"FileChunked", "FileDeleted"})

    def __init__(self, embedder: Embedder, index: VectorIndex) -> None:
        super().__init__(index)
        self.embedder = embedder
        self.index = index
        self.embedded_texts = 0
        self.reused_vectors = 0
        self.failed_chunks = 0
        self._tier: int | None = None

    def start(self) -> None:
        self.index.ensure(self.embedder.dimension, self.embedder.model_name)

    def _apply(self, envelopes: Sequence[EventEnvelope], last: int) -> None:
        files = [_points_for(e) for e in envelopes if e.event_type == "FileChunked"]
        vectors = iter(self._vectors_for(files))
        chunked = iter(files)
        for envelope in envelopes:  # in order: a deletion after a new version wins, and back
            if envelope.event_type == "FileChunked":
                file_chunks = next(chunked)
                self._replace_file(file_chunks, [next(vectors) for _ in file_chunks.points])
            elif envelope.event_type == "FileDeleted":
                p = envelope.payload
                self.index.delete_where("file_key", _file_key(p["tenant_id"], p["file_urn"]))
        self.index.save_checkpoint(self.name, last)
        if files:
            self._advise_on_size()

    def _vectors_for(self, files: list[_FileChunks]) -> list[list[float]]:
        """Embed only new text: a chunk whose text the file already had keeps its vector."""
        known = self._known_vectors(files)
        points = [p for f in files for p in f.points]
        vectors: list[list[float] | None] = [
            known.get(payload["text_hash"]) for *_, payload in points
        ]
        missing = [i for i, v in enumerate(vectors) if v is None]
        for slot, vector in zip(missing, self._embed([points[i][1] for i in missing]), strict=True):
            vectors[slot] = vector
        self.reused_vectors += len(points) - len(missing)
        return [v for v in vectors if v is not None]

    def _known_vectors(self, files: list[_FileChunks]) -> dict[str, list[float]]:
        known: dict[str, list[float]] = {}
        for key in {
            f.envelope.payload["tenant_id"] + "|" + f.envelope.payload["file_urn"] for f in files
        }:
            for point in self.index.find_where("file_key", key):
                known.setdefault(point.payload.get("text_hash", ""), point.vector)
        return known

    def _embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        # Sorting by length keeps padding low inside each model batch; restore order after.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        try:
            vectors = self.embedder.embed([texts[i] for i in order])
        except Exception as error:  # one bad text must not block the others: go one by one
            log.warning(
                "embedding a batch of %d with %s failed (%s); retrying each text",
                len(texts),
                self.embedder.model_name,
                error,
            )
            vectors = [self._embed_one(texts[i]) for i in order]
        result: list[list[float]] = [[] for _ in texts]
        for slot, i in enumerate(order):
            result[i] = vectors[slot]
        self.embedded_texts += len(texts)
        return result

    def _embed_one(self, text: str, attempts: int = 3) -> list[float]:
        for attempt in range(1, attempts + 1):
            try:
                return self.embedder.embed([text])[0]
            except Exception as error:
                last = error
                log.warning("embedding attempt %d/%d failed: %s", attempt, attempts, error)
        self.failed_chunks += 1
        log.error(
            "chunk not embedded after %d attempts (%s); left out, the rest of the file goes on",
            attempts,
            last,
        )
        return []  # no point for it; counted in failed_chunks, tried again with the next version

    def _advise_on_size(self) -> None:
        count = self.index.count()
        tier = tier_of(count)
        if tier != self._tier:
            advice = recommended_hnsw(count)
            log.info(
                "vector collection holds %d vectors: recommended HNSW m=%d ef_construct=%d "
                "(QDRANT_HNSW_M, QDRANT_HNSW_EF_CONSTRUCT)",
                count,
                advice.m,
                advice.ef_construct,
            )
            self._tier = tier

    def _replace_file(self, file_chunks: _FileChunks, vectors: list[list[float]]) -> None:
        points = [
            VectorPoint(pid, vector, payload)
            for (pid, _, payload), vector in zip(file_chunks.points, vectors, strict=True)
            if vector  # a chunk whose embedding failed has none
        ]
        payload = file_chunks.envelope.payload
        self.index.upsert(points)
        # Chunks of an earlier version that the new one no longer has.
        self.index.delete_where(
            "file_key", _file_key(payload["tenant_id"], payload["file_urn"]), [p.id for p in points]
        )


def repository_id(tenant_id: str, project_id: str, source: str) -> str:
    return str(Repository.create_id(tenant_id, project_id, source))


def _text_hash(path: str, text: str) -> str:
    return hashlib.sha256(embedding_text(path, text).encode()).hexdigest()


def _file_key(tenant_id: str, file_urn: str) -> str:
    return f"{tenant_id}|{file_urn}"


def _points_for(envelope: EventEnvelope) -> _FileChunks:
    p = envelope.payload
    points = []
    for chunk in p["chunks"]:
        urn = str(Urn.for_chunk(p["project_id"], p["path"], int(chunk["index"])))
        payload = {
            "urn": urn,
            "file_urn": p["file_urn"],
            "file_key": _file_key(p["tenant_id"], p["file_urn"]),
            "project_id": p["project_id"],
            "tenant_id": p["tenant_id"],
            "tags": list(p["tags"]),
            "path": p["path"],
            "file_path": p["path"],
            "relative_path": p["path"],
            "source": p.get("source", ""),
            "repository_id": repository_id(p["tenant_id"], p["project_id"], p.get("source", "")),
            "line_start": chunk["line_start"],
            "line_end": chunk["line_end"],
            "chunk_type": chunk["chunk_type"],
            "name": chunk.get("name"),
            "tables": list(chunk.get("tables", [])),
            "columns": list(chunk.get("columns", [])),
            "chunk_index": chunk["index"],
            "text": chunk["text"],
            "text_hash": _text_hash(envelope.payload["path"], chunk["text"]),
            "content_hash": p["content_hash"],
            "position": envelope.position,
        }
        text = embedding_text(p["path"], chunk["text"])
        points.append((point_id(p["tenant_id"], urn), text, payload))
    return _FileChunks(envelope, points)
