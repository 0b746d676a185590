"""One contract for the VectorIndex port, run against every adapter."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from adapters.memory import InMemoryVectorIndex
from adapters.qdrant_index import EmbeddingModelMismatch, QdrantVectorIndex
from domain.ports import VectorIndex, VectorPoint


def _qdrant_local(tmp_path) -> QdrantVectorIndex:
    return QdrantVectorIndex("contract", path=tmp_path / "qdrant")


def _qdrant_server(_tmp_path) -> QdrantVectorIndex:
    url = os.environ["QDRANT_URL"]
    return QdrantVectorIndex(f"contract_{uuid.uuid4().hex[:8]}", url=url)


ADAPTERS = [
    pytest.param(lambda _: InMemoryVectorIndex(), id="memory", marks=pytest.mark.unit),
    pytest.param(_qdrant_local, id="qdrant-local", marks=pytest.mark.integration),
]
if os.environ.get("QDRANT_URL"):  # a Qdrant server is not available on every machine
    ADAPTERS.append(pytest.param(_qdrant_server, id="qdrant-server", marks=pytest.mark.integration))


@pytest.fixture(params=ADAPTERS)
def index(request, tmp_path) -> Iterator[VectorIndex]:
    index = request.param(tmp_path)
    index.ensure(3, "model-a")
    yield index
    index.drop()
    index.close()


def _point(n: int, vector: list[float], **payload) -> VectorPoint:
    pid = str(uuid.UUID(int=n))
    return VectorPoint(pid, vector, {"name": f"p{n}", **payload})


def test_search_ranks_by_cosine_similarity(index):
    index.upsert([_point(1, [1, 0, 0]), _point(2, [0, 1, 0]), _point(3, [0.9, 0.1, 0])])
    hits = index.search([1, 0, 0], 2)
    assert [h.payload["name"] for h in hits] == ["p1", "p3"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)


def test_search_filters_on_payload_fields(index):
    index.upsert([_point(1, [1, 0, 0], tenant_id="a"), _point(2, [1, 0, 0], tenant_id="b")])
    hits = index.search([1, 0, 0], 10, {"tenant_id": "b"})
    assert [h.payload["name"] for h in hits] == ["p2"]


def test_access_tags_show_untagged_points_and_points_sharing_a_tag(index):
    index.upsert(
        [
            _point(1, [1, 0, 0], tags=[]),
            _point(2, [1, 0, 0], tags=["finance"]),
            _point(3, [1, 0, 0], tags=["hr", "ops"]),
            _point(4, [1, 0, 0]),
        ]
    )

    def names(tags):
        return sorted(h.payload["name"] for h in index.search([1, 0, 0], 10, None, tags))

    assert names(None) == ["p1", "p2", "p3", "p4"]
    assert names(()) == ["p1", "p4"]
    assert names(["finance"]) == ["p1", "p2", "p4"]
    assert names(["ops", "legal"]) == ["p1", "p3", "p4"]


def test_upsert_with_the_same_id_replaces(index):
    index.upsert([_point(1, [1, 0, 0])])
    index.upsert([_point(1, [0, 1, 0], version=2)])
    assert index.count() == 1
    assert index.dump()[0].payload["version"] == 2


def test_delete_where_keeps_the_listed_ids(index):
    index.upsert([_point(n, [1, 0, 0], file_key="f") for n in (1, 2, 3)] + [_point(4, [1, 0, 0])])
    index.delete_where("file_key", "f", keep_ids=[str(uuid.UUID(int=2))])
    assert sorted(p.payload["name"] for p in index.dump()) == ["p2", "p4"]


def test_dump_is_sorted_by_id_and_has_vectors(index):
    index.upsert([_point(3, [0, 0, 1]), _point(1, [1, 0, 0])])
    dumped = index.dump()
    assert [p.id for p in dumped] == sorted(p.id for p in dumped)
    assert dumped[0].vector == pytest.approx([1, 0, 0])


def test_checkpoints_start_at_zero_and_survive_writes(index):
    assert index.checkpoint("vectors") == 0
    index.save_checkpoint("vectors", 42)
    index.upsert([_point(1, [1, 0, 0])])
    assert index.checkpoint("vectors") == 42
    assert index.checkpoint("other") == 0


def test_drop_clears_points_and_checkpoints(index):
    index.upsert([_point(1, [1, 0, 0])])
    index.save_checkpoint("vectors", 7)
    index.drop()
    assert index.count() == 0
    assert index.checkpoint("vectors") == 0
    index.upsert([_point(1, [1, 0, 0])])  # still usable after a drop
    assert index.count() == 1


def test_a_different_embedding_model_is_refused(index):
    with pytest.raises(EmbeddingModelMismatch):
        index.ensure(4, "model-b")
