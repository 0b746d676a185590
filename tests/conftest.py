"""Shared fixtures: real servers started per test where a test needs them, fakes otherwise."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from adapters.memory import HashingEmbedder, InMemoryVectorIndex
from adapters.settings import Settings
from bus.nats_server import EmbeddedNatsServer
from commands.application import UpstreamApplication

POSTGRES_DSN = os.environ.get("UPSTREAM_TEST_POSTGRES", "host=127.0.0.1 port=5432 dbname=test")


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture
def memory_index() -> InMemoryVectorIndex:
    return InMemoryVectorIndex()


@pytest.fixture
def memory_app() -> Iterator[UpstreamApplication]:
    app = UpstreamApplication(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
    yield app
    app.close()


@pytest.fixture
def sqlite_app(tmp_path: Path) -> Iterator[UpstreamApplication]:
    app = UpstreamApplication(
        env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "ev.db")}
    )
    yield app
    app.close()


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[EmbeddedNatsServer]:
    """A real nats-server with JetStream on a free port, its own store, stopped afterwards."""
    server = EmbeddedNatsServer(tmp_path / "nats")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def postgres_schema() -> Iterator[dict[str, str]]:
    """A fresh schema on the machine's PostgreSQL, dropped afterwards: the production store."""
    import psycopg

    schema = f"upstream_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": "test",
        "POSTGRES_HOST": "127.0.0.1",
        "POSTGRES_PORT": "5432",
        "POSTGRES_USER": os.environ.get("UPSTREAM_TEST_POSTGRES_USER", "postgres"),
        "POSTGRES_PASSWORD": "",
        "POSTGRES_SCHEMA": schema,
    }
    yield env
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(UPSTREAM_DATA_DIR=tmp_path / "data")  # type: ignore[call-arg]
