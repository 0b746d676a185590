"""Start-up of the whole embedded profile with the real embedding model."""

from __future__ import annotations

import logging
import time

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import DataDirLocked, bootstrap
from api.app import create_app

pytestmark = pytest.mark.integration


@pytest.mark.spec("LLM-03.1")
def test_embedded_start_up_completes_within_30_s_and_logs_each_step(settings, caplog):
    caplog.set_level(logging.INFO, logger="upstream.bootstrap")
    started = time.monotonic()
    with TestClient(create_app(settings)) as client:
        elapsed = time.monotonic() - started
        health = client.get("/health").json()

    assert elapsed < 30
    steps = [s["step"] for s in health["startup"]]
    assert steps[:3] == ["lock data dir", "bus", "embedder"]
    assert "vector store" in steps
    assert health["status"] == "ok" and health["profile"] == "embedded"
    components = health["components"]
    assert components["embedder"] == {"status": "ok", "model": "all-MiniLM-L6-v2", "dimension": 384}
    assert components["vector_store"]["status"] == "ok"
    assert components["bus"]["embedded"] is True
    for step in steps:
        assert any(f"start-up: {step} ok" in r.message for r in caplog.records)


async def test_a_second_process_on_the_same_data_dir_is_refused(settings):
    from adapters.memory import HashingEmbedder

    first = bootstrap(settings, "offline", embedder=HashingEmbedder())
    await first.start()
    second = bootstrap(settings, "offline", embedder=HashingEmbedder())
    with pytest.raises(DataDirLocked):
        await second.start()
    await first.stop()
