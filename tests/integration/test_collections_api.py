"""The collections API (rag-providers.md, served over Qdrant) through HTTP: commands over an
in-process bus (JSON on the wire, errors as dicts, as NATS carries them), the event store in a
temp SQLite file, and the collections projection into Qdrant local mode in a temp dir."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from adapters.qdrant_collections import QdrantCollections
from api.errors import install_error_handlers
from api.routes import collections as collection_routes
from bus.collection_subjects import (
    CMD_COLLECTION_ADD_DOCUMENTS,
    CMD_COLLECTION_CREATE,
    CMD_COLLECTION_DELETE,
    CMD_COLLECTION_EMPTY,
    CMD_COLLECTION_UPDATE_METADATA,
)
from bus.intake import handle
from commands.application import UpstreamApplication
from commands.collections import (
    AddDocuments,
    CreateCollection,
    DeleteCollection,
    EmptyCollection,
    UpdateCollectionMetadata,
)
from commands.models import Command, CommandResult
from domain.errors import NotCaughtUp, error_from_dict
from projections.collections import CollectionsProjection
from projections.rebuild import catch_up, rebuild

pytestmark = pytest.mark.integration

DIM = 4


CollectionsApp: type[Any] = UpstreamApplication  # it inherits CollectionCommands


class InProcessBus:
    """The command bus without NATS, exactly as `bus.command_bus.CommandBus` behaves."""

    def __init__(self, app: Any) -> None:
        self.routes: dict[str, tuple[type[Command], Any]] = {
            CMD_COLLECTION_CREATE: (CreateCollection, app.create_collection),
            CMD_COLLECTION_UPDATE_METADATA: (
                UpdateCollectionMetadata,
                app.update_collection_metadata,
            ),
            CMD_COLLECTION_ADD_DOCUMENTS: (AddDocuments, app.add_documents),
            CMD_COLLECTION_EMPTY: (EmptyCollection, app.empty_collection),
            CMD_COLLECTION_DELETE: (DeleteCollection, app.delete_collection),
        }
        self.sent: list[str] = []

    async def send(self, subject: str, command: Command) -> CommandResult:
        self.sent.append(subject)
        model, method = self.routes[subject]
        wire = json.loads(json.dumps(command.model_dump(mode="json")))
        reply = (await handle(method, model.model_validate(wire))).as_dict()
        result = CommandResult.model_validate(json.loads(json.dumps(reply)))
        if not result.accepted and result.error is not None:
            raise error_from_dict(result.error)
        return result


class FakeEmbedder:
    """A deterministic 4-d embedder: the text's letters a, b, c, d counted."""

    model_name = "fake-4d"
    dimension = DIM

    def warm_up(self) -> None:
        pass

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(t.count(ch)) + 0.01 for ch in "abcd"] for t in texts]


@dataclass
class FakeContainer:
    app: Any
    collections: QdrantCollections
    projection: CollectionsProjection
    embedder: FakeEmbedder = field(default_factory=FakeEmbedder)
    command_bus: InProcessBus = field(init=False)

    def __post_init__(self) -> None:
        self.command_bus = InProcessBus(self.app)

    async def wait_for(self, position: int, timeout_s: float | None = None) -> None:
        await asyncio.to_thread(catch_up, self.projection, self.app)
        if self.projection.position() < position:
            raise NotCaughtUp(f"collections has not reached position {position}")


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    app = CollectionsApp(
        env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "ev.db")}
    )
    store = QdrantCollections(path=tmp_path / "qdrant")
    projection = CollectionsProjection(store)
    projection.start()
    container = FakeContainer(app, store, projection)
    web = FastAPI()
    install_error_handlers(web)
    web.include_router(collection_routes.router)
    web.state.container = container
    with TestClient(web, raise_server_exceptions=False) as client:
        client.container = container  # type: ignore[attr-defined]
        yield client
    store.close()
    app.close()


def _vector(i: int) -> list[float]:
    return [1.0, float(i % 7) + 0.5, float(i % 3), 0.25]


def _doc(i: int, **metadata: Any) -> dict[str, Any]:
    return {"id": f"d{i}", "text": f"document {i}", "metadata": metadata, "embedding": _vector(i)}


def _create(service: TestClient, name: str = "docs", **body: Any) -> dict[str, Any]:
    reply = service.post("/collections?wait=true", json={"name": name, **body})
    assert reply.status_code == 201, reply.text
    result: dict[str, Any] = reply.json()
    return result


def _add(service: TestClient, name: str, documents: list[dict[str, Any]]) -> dict[str, Any]:
    reply = service.post(f"/collections/{name}/documents?wait=true", json={"documents": documents})
    assert reply.status_code == 200, reply.text
    result: dict[str, Any] = reply.json()
    return result


def _page(service: TestClient, name: str, **params: Any) -> dict[str, Any]:
    query = {k: json.dumps(v) if k == "where" else v for k, v in params.items()}
    reply = service.get(f"/collections/{name}/documents", params=query)
    assert reply.status_code == 200, reply.text
    result: dict[str, Any] = reply.json()
    return result


def _book(service: TestClient) -> None:
    """Three chapters of headings, paragraphs, code and lists."""
    _create(service, "book")
    documents = []
    kinds = ["heading", "paragraph", "paragraph", "code", "list"]
    for i in range(30):
        documents.append(
            _doc(
                i,
                chapter_id=str(i // 10 + 1),
                chapter=str(i // 10 + 1),
                doc_type=kinds[i % 5],
                section_id=f"s{i // 5}",
                order=i,
            )
        )
    _add(service, "book", documents)


# -- documents with pre-computed embeddings ---------------------------------------------------
@pytest.mark.spec("PRV-04.1")
def test_documents_with_embeddings_are_stored_and_the_count_returned(service):
    _create(service)
    reply = service.post(
        "/collections/docs/documents?wait=true",
        json={"documents": [_doc(1, kind="a"), _doc(2, kind="b"), _doc(3, kind="a")]},
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["status"] == "success" and body["count"] == 3 and body["waited"]
    assert body["position"] > 0
    assert service.get("/collections/docs").json()["count"] == 3
    page = _page(service, "docs")
    assert [d["id"] for d in page["documents"]] == ["d1", "d2", "d3"]
    assert page["documents"][0] == {"id": "d1", "text": "document 1", "metadata": {"kind": "a"}}
    hits = service.post("/collections/docs/query", json={"embedding": _vector(2), "top_k": 1})
    assert hits.status_code == 200, hits.text
    assert hits.json()["results"][0]["id"] == "d2"
    assert hits.json()["results"][0]["score"] == pytest.approx(1.0)


def test_documents_without_ids_get_deterministic_ids_and_a_resend_stores_them_once(service):
    _create(service)
    documents = [
        {"text": "same", "embedding": _vector(1)},
        {"text": "same", "embedding": _vector(1)},
    ]
    _add(service, "docs", documents)
    _add(service, "docs", documents)
    ids = [d["id"] for d in _page(service, "docs")["documents"]]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert service.get("/collections/docs").json()["count"] == 2


@pytest.mark.spec("PRV-04.2")
def test_documents_without_embeddings_are_400(service):
    _create(service)
    reply = service.post(
        "/collections/docs/documents",
        json={"documents": [_doc(1), {"id": "x", "text": "no vector", "metadata": {}}]},
    )
    assert reply.status_code == 400
    assert reply.json()["message"] == "All documents must include pre-computed embeddings"
    assert service.get("/collections/docs").json()["count"] == 0


@pytest.mark.spec("PRV-04.3")
def test_an_embedding_that_is_not_an_array_of_numbers_is_400_describing_it(service):
    _create(service)
    for bad in ("0.1,0.2", [0.1, "x", 0.3, 0.4], [], {"v": 1}, [0.1, True, 0.2, 0.3]):
        reply = service.post(
            "/collections/docs/documents?wait=true",
            json={"documents": [{"text": "t", "embedding": bad}]},
        )
        assert reply.status_code == 400, (bad, reply.text)
        message = reply.json()["message"]
        assert message.startswith("Invalid embedding format for document at index 0")
        assert "array of numbers" in message
    assert service.get("/collections/docs").json()["count"] == 0


@pytest.mark.spec("PRV-04.4")
def test_embeddings_of_different_dimensions_in_one_request_are_400(service):
    _create(service)
    documents = [_doc(1), {"text": "short", "embedding": [0.1, 0.2, 0.3]}]
    reply = service.post("/collections/docs/documents", json={"documents": documents})
    assert reply.status_code == 400
    body = reply.json()
    assert body["error"] == "embedding_dimension_mismatch"
    assert "dimension mismatch" in body["message"] and "4" in body["message"]
    assert "3" in body["message"]
    # The collection then records its dimension: a later request of another one is refused too.
    _add(service, "docs", [_doc(1)])
    later = service.post("/collections/docs/documents", json={"documents": [documents[1]]})
    assert later.status_code == 400 and "stores 4-dimensional" in later.json()["message"]


@pytest.mark.spec("PRV-04.5")
def test_an_empty_or_missing_documents_array_is_400(service):
    _create(service)
    for body in ({"documents": []}, {}, {"documents": None}, {"documents": "nope"}):
        reply = service.post("/collections/docs/documents", json=body)
        assert reply.status_code == 400, reply.text
        assert reply.json()["message"] == "Documents array is required"


# -- collection metadata --------------------------------------------------------------------------
@pytest.mark.spec("PRV-05.1")
def test_create_keeps_metadata_and_the_top_level_embedding_fields(service):
    metadata = {"display_name": "Docs", "provider_type": "anything", "query_profile": {"k": 5}}
    created = _create(
        service,
        metadata=metadata,
        embedding_provider="ollama",
        embedding_model="nomic-embed-text",
    )
    assert created["status"] == "created" and created["waited"]
    expected = {**metadata, "embedding_provider": "ollama", "embedding_model": "nomic-embed-text"}
    assert created["metadata"] == expected
    info = service.get("/collections/docs").json()
    assert info["metadata"] == expected and info["embedding_model"] == "nomic-embed-text"
    again = service.post("/collections", json={"name": "docs"})
    assert again.status_code == 409
    assert again.json()["message"] == "Collection 'docs' already exists"
    bad = service.post("/collections", json={"name": "no spaces/allowed"})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_collection_name"


@pytest.mark.spec("PRV-05.2")
def test_get_collection_returns_its_metadata_and_count(service):
    _create(service, metadata={"description": "Docs"})
    _add(service, "docs", [_doc(1), _doc(2)])
    info = service.get("/collections/docs")
    assert info.status_code == 200
    body = info.json()
    assert body["name"] == "docs" and body["metadata"] == {"description": "Docs"}
    assert body["count"] == 2 and body["dimension"] == DIM
    missing = service.get("/collections/nope")
    assert missing.status_code == 404
    assert missing.json()["message"] == "Collection 'nope' not found"


@pytest.mark.spec("PRV-05.3")
def test_put_metadata_updates_it_and_returns_success(service):
    _create(service, metadata={"description": "old"})
    reply = service.put("/collections/docs/metadata?wait=true", json={"metadata": {"d": "new"}})
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] == "updated" and reply.json()["metadata"] == {"d": "new"}
    assert service.get("/collections/docs").json()["metadata"] == {"d": "new"}
    missing = service.put("/collections/nope/metadata", json={"metadata": {}})
    assert missing.status_code == 404
    assert service.put("/collections/docs/metadata", json={}).status_code == 400
    not_object = service.put("/collections/docs/metadata", json={"metadata": [1, 2]})
    assert not_object.status_code == 400


@pytest.mark.spec("PRV-05.4")
def test_list_returns_every_collection_with_its_metadata(service):
    _create(service, "alpha", metadata={"n": 1})
    _create(service, "beta", metadata={"n": 2})
    _add(service, "beta", [_doc(1)])
    body = service.get("/collections").json()
    assert body["count"] == 2
    assert [(c["name"], c["metadata"], c["count"]) for c in body["collections"]] == [
        ("alpha", {"n": 1}, 0),
        ("beta", {"n": 2}, 1),
    ]


def test_delete_removes_the_collection_and_the_name_can_be_used_again(service):
    _create(service, metadata={"v": 1})
    _add(service, "docs", [_doc(1), _doc(2)])
    reply = service.delete("/collections/docs?wait=true")
    assert reply.status_code == 200
    assert reply.json()["status"] == "deleted" and reply.json()["count_deleted"] == 2
    assert service.get("/collections/docs").status_code == 404
    assert service.get("/collections").json()["count"] == 0
    assert service.delete("/collections/docs").status_code == 404
    _create(service, metadata={"v": 2})
    info = service.get("/collections/docs").json()
    assert info["count"] == 0 and info["metadata"] == {"v": 2}


def test_tenants_do_not_see_each_others_collections(service):
    _create(service)
    other = {"X-Tenant-Id": "acme"}
    assert service.get("/collections", headers=other).json()["count"] == 0
    assert service.get("/collections/docs", headers=other).status_code == 404
    created = service.post("/collections?wait=true", json={"name": "docs"}, headers=other)
    assert created.status_code == 201


# -- metadata filters -----------------------------------------------------------------------------
@pytest.mark.spec("PRV-06.1")
def test_simple_equality_filter(service):
    _book(service)
    page = _page(service, "book", where={"section_id": "s2"})
    assert set(page) >= {"documents", "count", "total"}
    assert page["count"] == page["total"] == 5
    assert all(d["metadata"]["section_id"] == "s2" for d in page["documents"])
    assert all(set(d) == {"id", "text", "metadata"} for d in page["documents"])


@pytest.mark.spec("PRV-06.2")
def test_multiple_fields_are_an_implicit_and(service):
    _book(service)
    page = _page(service, "book", where={"chapter_id": "1", "doc_type": "paragraph"})
    assert page["total"] == 4
    assert all(
        d["metadata"]["chapter_id"] == "1" and d["metadata"]["doc_type"] == "paragraph"
        for d in page["documents"]
    )


@pytest.mark.spec("PRV-06.3")
def test_in_operator(service):
    _book(service)
    page = _page(service, "book", where={"doc_type": {"$in": ["heading", "paragraph"]}})
    assert page["total"] == 18
    kinds = {d["metadata"]["doc_type"] for d in page["documents"]}
    assert kinds == {"heading", "paragraph"}
    assert "code" not in kinds and "list" not in kinds


def test_other_operators_are_evaluated_by_qdrant(service):
    _book(service)
    assert _page(service, "book", where={"order": {"$gte": 25}})["total"] == 5
    assert _page(service, "book", where={"order": {"$gt": 3, "$lt": 6}})["total"] == 2
    assert _page(service, "book", where={"doc_type": {"$ne": "code"}})["total"] == 24
    assert _page(service, "book", where={"doc_type": {"$nin": ["code", "list"]}})["total"] == 18
    assert _page(service, "book", where={"order": {"$in": [1, 2, 40]}})["total"] == 2
    both = {"$and": [{"chapter": "2"}, {"doc_type": {"$eq": "heading"}}]}
    assert _page(service, "book", where=both)["total"] == 2
    assert _page(service, "book", where={"order": 3.0})["total"] == 1
    hits = service.post(
        "/collections/book/query",
        json={"embedding": _vector(0), "where": {"chapter": "3"}, "top_k": 50},
    ).json()["results"]
    assert len(hits) == 10 and all(h["metadata"]["chapter"] == "3" for h in hits)


@pytest.mark.spec("PRV-06.4")
def test_or_operator(service):
    _book(service)
    page = _page(service, "book", where={"$or": [{"chapter": "1"}, {"chapter": "3"}]})
    assert page["total"] == 20
    assert {d["metadata"]["chapter"] for d in page["documents"]} == {"1", "3"}


@pytest.mark.spec("PRV-06.5")
def test_no_filter_returns_the_first_100(service):
    _create(service)
    for start in range(0, 500, 250):
        _add(service, "docs", [_doc(i, n=i) for i in range(start, start + 250)])
    page = _page(service, "docs")
    assert page["count"] == 100 and page["total"] == 500
    assert [d["id"] for d in page["documents"]] == [f"d{i}" for i in range(100)]


@pytest.mark.spec("PRV-06.6")
def test_pagination_with_limit_and_offset(service):
    _create(service)
    _add(service, "docs", [_doc(i, group="g" if i < 250 else "h") for i in range(300)])
    page = _page(service, "docs", where={"group": "g"}, limit=50, offset=100)
    assert page["count"] == 50 and page["total"] == 250
    assert [d["id"] for d in page["documents"]] == [f"d{i}" for i in range(100, 150)]
    tail = _page(service, "docs", where={"group": "g"}, limit=50, offset=240)
    assert tail["count"] == 10 and tail["total"] == 250
    beyond = _page(service, "docs", where={"group": "g"}, offset=1000)
    assert beyond["count"] == 0 and beyond["total"] == 250
    for bad in ({"limit": 0}, {"offset": -1}):
        assert service.get("/collections/docs/documents", params=bad).status_code == 400


@pytest.mark.spec("PRV-06.7")
def test_a_filter_matching_nothing_is_an_empty_200(service):
    _book(service)
    reply = service.get("/collections/book/documents", params={"where": '{"chapter": "99"}'})
    assert reply.status_code == 200
    body = reply.json()
    assert (body["documents"], body["count"], body["total"]) == ([], 0, 0)


@pytest.mark.spec("PRV-06.8")
def test_documents_of_a_missing_collection_is_404(service):
    reply = service.get("/collections/nonexistent/documents")
    assert reply.status_code == 404
    assert reply.json()["message"] == "Collection 'nonexistent' not found"


@pytest.mark.spec("PRV-06.9")
def test_invalid_json_filter_is_400(service):
    _book(service)
    reply = service.get("/collections/book/documents", params={"where": "invalid-json-string"})
    assert reply.status_code == 400
    assert reply.json()["message"] == "Invalid 'where' filter: must be valid JSON"
    for bad in ('["a"]', '{"a": {"$regex": "x"}}', '{"$or": []}', '{"n": {"$gt": "x"}}'):
        reply = service.get("/collections/book/documents", params={"where": bad})
        assert reply.status_code == 400, bad
        assert reply.json()["message"].startswith("Invalid 'where' filter: ")


@pytest.mark.spec("PRV-06.10")
def test_the_limit_is_capped_at_1000(service):
    _create(service)
    for start in range(0, 1200, 400):
        _add(service, "docs", [_doc(i) for i in range(start, start + 400)])
    page = _page(service, "docs", limit=5000)
    assert page["count"] == 1000 and page["total"] == 1200 and page["limit"] == 1000


@pytest.mark.spec("PRV-06.11")
def test_sibling_gathering_returns_the_whole_section(service):
    _book(service)
    hit = service.post(
        "/collections/book/query",
        json={"embedding": _vector(12), "where": {"doc_type": "paragraph"}, "top_k": 1},
    ).json()["results"][0]
    section = hit["metadata"]["section_id"]
    page = _page(service, "book", where={"section_id": section})
    kinds = sorted(d["metadata"]["doc_type"] for d in page["documents"])
    assert kinds == ["code", "heading", "list", "paragraph", "paragraph"]
    assert hit["id"] in {d["id"] for d in page["documents"]}


# -- metadata values ------------------------------------------------------------------------------
@pytest.mark.spec("PRV-07.1", "PRV-07.5")
def test_metadata_values_are_deduplicated_and_sorted(service):
    _create(service, "recipes")
    regions = ["British Classics", "Asian & Middle Eastern Sweets", "British Classics"]
    regions.append("French Pastries")
    _add(service, "recipes", [_doc(i, region=r) for i, r in enumerate(regions)])
    first = service.get("/collections/recipes/metadata-values", params={"field": "region"})
    assert first.status_code == 200
    body = first.json()
    assert body["field"] == "region" and body["count"] == 3
    assert set(body["values"]) == {
        "British Classics",
        "Asian & Middle Eastern Sweets",
        "French Pastries",
    }
    assert body["values"] == sorted(body["values"])
    again = service.get("/collections/recipes/metadata-values", params={"field": "region"})
    assert again.json()["values"] == body["values"]


def test_metadata_values_of_numbers_and_floats(service):
    _create(service)
    _add(service, "docs", [_doc(i, n=i % 3, w=(i % 2) / 2, tags=["x", "y"]) for i in range(6)])
    values = service.get("/collections/docs/metadata-values?field=n").json()["values"]
    assert values == [0, 1, 2]
    assert service.get("/collections/docs/metadata-values?field=w").json()["values"] == [0.0, 0.5]
    assert service.get("/collections/docs/metadata-values?field=tags").json()["values"] == [
        "x",
        "y",
    ]


@pytest.mark.spec("PRV-07.2")
def test_metadata_values_of_a_field_no_document_has(service):
    _book(service)
    reply = service.get("/collections/book/metadata-values", params={"field": "nonexistent"})
    assert reply.status_code == 200
    assert reply.json() == {"field": "nonexistent", "values": [], "count": 0}


@pytest.mark.spec("PRV-07.3")
def test_metadata_values_of_a_missing_collection_is_404(service):
    reply = service.get("/collections/nonexistent/metadata-values", params={"field": "region"})
    assert reply.status_code == 404
    assert reply.json()["message"] == "Collection 'nonexistent' does not exist."


@pytest.mark.spec("PRV-07.4")
def test_metadata_values_without_field_is_400(service):
    _create(service)
    reply = service.get("/collections/docs/metadata-values")
    assert reply.status_code == 400
    assert "field parameter is required" in reply.json()["message"]


# -- merge mode -----------------------------------------------------------------------------------
START = {"description": "Test", "match_threshold": 0.5, "custom_field": "value"}


@pytest.mark.spec("PRV-08.1")
def test_merge_mode_preserves_the_existing_metadata(service):
    _create(service, metadata=START)
    reply = service.put(
        "/collections/docs/metadata?merge=true&wait=true", json={"metadata": {"new_field": "new"}}
    )
    assert reply.status_code == 200
    expected = {**START, "new_field": "new"}
    assert reply.json()["metadata"] == expected
    assert service.get("/collections/docs").json()["metadata"] == expected


@pytest.mark.spec("PRV-08.2")
def test_replace_mode_is_the_default(service):
    _create(service, metadata=START)
    service.put("/collections/docs/metadata?wait=true", json={"metadata": {"new_field": "new"}})
    assert service.get("/collections/docs").json()["metadata"] == {"new_field": "new"}


@pytest.mark.spec("PRV-08.3")
def test_explicit_replace_mode(service):
    _create(service, metadata=START)
    service.put(
        "/collections/docs/metadata?merge=false&wait=true", json={"metadata": {"new_field": "new"}}
    )
    assert service.get("/collections/docs").json()["metadata"] == {"new_field": "new"}


# -- emptying -------------------------------------------------------------------------------------
@pytest.mark.spec("PRV-09.1")
def test_emptying_a_collection_with_documents(service):
    _create(service, "test-collection", metadata={"display_name": "Test"})
    _add(service, "test-collection", [_doc(i) for i in range(100)])
    reply = service.delete("/collections/test-collection/documents/all?wait=true")
    assert reply.status_code == 200
    body = reply.json()
    assert {k: body[k] for k in ("status", "collection", "count_deleted")} == {
        "status": "emptied",
        "collection": "test-collection",
        "count_deleted": 100,
    }
    info = service.get("/collections/test-collection")
    assert info.status_code == 200
    assert info.json()["metadata"] == {"display_name": "Test"} and info.json()["count"] == 0
    assert _page(service, "test-collection")["total"] == 0


@pytest.mark.spec("PRV-09.2")
def test_emptying_an_empty_collection(service):
    _create(service, "test-collection")
    reply = service.delete("/collections/test-collection/documents/all?wait=true")
    assert reply.status_code == 200
    body = reply.json()
    assert (body["status"], body["collection"], body["count_deleted"]) == (
        "emptied",
        "test-collection",
        0,
    )


@pytest.mark.spec("PRV-09.3")
def test_emptying_a_missing_collection_is_404(service):
    reply = service.delete("/collections/missing-collection/documents/all")
    assert reply.status_code == 404
    assert reply.json()["message"] == "Collection 'missing-collection' not found"


@pytest.mark.spec("PRV-09.6")
def test_metadata_is_preserved_after_emptying_and_new_uploads_work(service):
    metadata = {"display_name": "Test", "description": "Docs", "query_profile": {"top_k": 5}}
    _create(service, metadata=metadata)
    _add(service, "docs", [_doc(i, k="a") for i in range(10)])
    service.delete("/collections/docs/documents/all?wait=true")
    info = service.get("/collections/docs").json()
    assert info["metadata"] == metadata and info["count"] == 0
    _add(service, "docs", [_doc(i, k="b") for i in range(3)])
    info = service.get("/collections/docs").json()
    assert info["metadata"] == metadata and info["count"] == 3 and info["dimension"] == DIM
    assert _page(service, "docs", where={"k": "a"})["total"] == 0
    assert _page(service, "docs", where={"k": "b"})["total"] == 3


class _FailOnce:
    """A seam in the real store: the named step raises the first time it is called."""

    def __init__(self, store: QdrantCollections, step: str) -> None:
        self.store, self.step, self.failed = store, step, False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        if name != self.step:
            return method

        def failing(*args: Any, **kwargs: Any) -> Any:
            if not self.failed:
                self.failed = True
                raise RuntimeError(f"injected failure in {name}")
            return method(*args, **kwargs)

        return failing


@pytest.mark.spec("PRV-09.5")
@pytest.mark.parametrize(
    ("step", "visible_after_failure"),
    [("ensure_generation", 20), ("put_record", 20), ("drop_other_generations", 0)],
)
def test_emptying_is_all_or_nothing_when_it_fails_half_way(service, step, visible_after_failure):
    _create(service, metadata={"keep": True})
    _add(service, "docs", [_doc(i, k="a") for i in range(20)])
    container = service.container
    real = container.projection.collections
    container.projection.collections = _FailOnce(real, step)

    failed = service.delete("/collections/docs/documents/all?wait=true")
    assert failed.status_code == 500  # the emptying is recorded; the read model stopped on it
    seen = _page(service, "docs")
    assert seen["total"] == visible_after_failure  # all of them, or none: never a part
    assert service.get("/collections/docs").json()["metadata"] == {"keep": True}

    asyncio.run(container.wait_for(container.app.max_position()))  # the retry completes it
    assert _page(service, "docs")["total"] == 0
    assert service.get("/collections/docs").json()["count"] == 0
    names = [c.name for c in real.client.get_collections().collections]
    assert len([n for n in names if n.startswith("col_") and n != "col__registry"]) == 1
    container.projection.collections = real


def test_a_rebuild_gives_the_same_read_model(service):
    _book(service)
    service.put("/collections/book/metadata?merge=true&wait=true", json={"metadata": {"x": 1}})
    _create(service, "gone")
    service.delete("/collections/gone?wait=true")
    before = service.get("/collections").json(), _page(service, "book", limit=1000)
    container = service.container
    rebuild(container.projection, container.app)
    after = service.get("/collections").json(), _page(service, "book", limit=1000)
    assert before == after


# -- similarity query -----------------------------------------------------------------------------
def test_query_by_text_uses_the_embedder_and_checks_the_model(service):
    _create(service, "fake", embedding_model="fake-4d")
    _add(service, "fake", [{"id": "aa", "text": "aaaa", "embedding": [4.01, 0.01, 0.01, 0.01]}])
    _add(service, "fake", [{"id": "dd", "text": "dddd", "embedding": [0.01, 0.01, 0.01, 4.01]}])
    hits = service.post("/collections/fake/query", json={"query_text": "ddd", "n_results": 1})
    assert hits.status_code == 200, hits.text
    assert [h["id"] for h in hits.json()["results"]] == ["dd"]
    _create(service, "other", embedding_model="nomic-embed-text")
    refused = service.post("/collections/other/query", json={"text": "ddd"})
    assert refused.status_code == 400 and "nomic-embed-text" in refused.json()["message"]
    wrong = service.post("/collections/fake/query", json={"embedding": [1.0, 2.0]})
    assert wrong.status_code == 400 and "dimension mismatch" in wrong.json()["message"]
    assert service.post("/collections/nope/query", json={"embedding": [1.0]}).status_code == 404
