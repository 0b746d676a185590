"""An embedded service (hashing embedder) with a test corpus ingested, for module fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from adapters.bootstrap import bootstrap
from adapters.memory import HashingEmbedder
from adapters.settings import Settings
from api.app import create_app
from commands.sources.local import LocalFile, walk


def corpus_files(corpus: Path) -> list[dict[str, str]]:
    """The corpus's text files, dbt_project.yml first (it names the project's configs)."""
    files = [f for f in walk(corpus, 1_000_000) if isinstance(f, LocalFile)]
    files.sort(key=lambda f: (not f.path.endswith("dbt_project.yml"), f.path))
    return [{"path": f.path, "content": f.content} for f in files]


@contextmanager
def ingested_service(
    data_dir: Path, corpus: Path, project_id: str, **settings: Any
) -> Iterator[TestClient]:
    """A running service on `data_dir` with `corpus` ingested as `project_id` (read models
    caught up); the client carries the container as `.container`."""
    config = Settings(UPSTREAM_DATA_DIR=data_dir, **settings)  # type: ignore[call-arg]
    container = bootstrap(config, "serve", embedder=HashingEmbedder())
    with TestClient(create_app(container=container)) as client:
        body = {"project_id": project_id, "files": corpus_files(corpus)}
        reply = client.post("/api/v1/ingest?wait=true", json=body)
        assert reply.status_code == 200, reply.text
        client.container = container  # type: ignore[attr-defined]
        yield client
