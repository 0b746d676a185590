"""Emptying a 50,000-document collection through the HTTP API of the whole service
(PRV-09.4): one command, one event, a generation switch; well under the spec's 30 s."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import bootstrap
from adapters.memory import HashingEmbedder
from adapters.settings import Settings
from api.app import create_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DOCUMENTS = 50_000
BATCH = 5_000


@pytest.mark.spec("PRV-09.4")
def test_emptying_50000_documents_deletes_them_all_within_30_seconds(tmp_path):
    settings = Settings(UPSTREAM_DATA_DIR=tmp_path / "data")  # type: ignore[call-arg]
    container = bootstrap(settings, "serve", embedder=HashingEmbedder())
    with TestClient(create_app(container=container)) as client:
        metadata = {"display_name": "Large", "description": "Docs"}
        assert client.post(
            "/collections", json={"name": "large-collection", "metadata": metadata}
        ).is_success
        for start in range(0, DOCUMENTS, BATCH):
            documents = [
                {
                    "id": f"d{i}",
                    "text": f"doc {i}",
                    "metadata": {"n": i},
                    "embedding": [1.0, i % 5, 0.5, 2.0],
                }
                for i in range(start, start + BATCH)
            ]
            last = start + BATCH >= DOCUMENTS
            reply = client.post(
                f"/collections/large-collection/documents?wait={str(last).lower()}",
                json={"documents": documents},
            )
            assert reply.status_code == 200, reply.text
        assert client.get("/collections/large-collection").json()["count"] == DOCUMENTS

        started = time.perf_counter()
        reply = client.delete("/collections/large-collection/documents/all?wait=true")
        seconds = time.perf_counter() - started

        assert reply.status_code == 200
        assert reply.json()["count_deleted"] == DOCUMENTS
        assert seconds < 30, f"emptying took {seconds:.1f} s"
        after = client.get("/collections/large-collection").json()
        assert after["count"] == 0 and after["metadata"] == metadata
