"""HNSW settings per corpus size, the cron schedule, and the index maintenance job."""

from __future__ import annotations

from datetime import datetime

import pytest
from qdrant_client import models

from adapters.qdrant_index import QdrantVectorIndex
from domain.index_tuning import CronError, CronSchedule, recommended_hnsw
from domain.ports import VectorPoint
from queries.index_maintenance import ReindexJob

pytestmark = pytest.mark.unit


@pytest.mark.spec("LLM-39.2")
@pytest.mark.parametrize(
    ("count", "m", "ef"),
    [(0, 16, 100), (9_999, 16, 100), (10_000, 24, 150), (99_999, 24, 150), (100_001, 32, 200)],
)
def test_recommended_hnsw_follows_corpus_size(count, m, ef):
    assert recommended_hnsw(count).to_dict() == {"m": m, "ef_construct": ef}


@pytest.mark.spec("LLM-39.1")
def test_new_collections_get_the_configured_hnsw_parameters(tmp_path, monkeypatch):
    index = QdrantVectorIndex("c", path=tmp_path / "q", hnsw_m=24, hnsw_ef_construct=150)
    seen = {}
    original = index.client.create_collection

    def spy(name, **kwargs):
        seen[name] = kwargs.get("hnsw_config")
        return original(name, **kwargs)

    monkeypatch.setattr(index.client, "create_collection", spy)
    index.ensure(4, "m")
    assert seen["c"] == models.HnswConfigDiff(m=24, ef_construct=150)
    index.close()


def test_cron_schedules_parse_and_fire():
    nightly = CronSchedule.parse("30 2 * * *")
    assert nightly.next_after(datetime(2026, 11, 21, 13, 0)) == datetime(2026, 11, 22, 2, 30)
    weekdays = CronSchedule.parse("*/15 9-17 * * 1-5")
    assert weekdays.next_after(datetime(2026, 11, 21, 13, 0)) == datetime(2026, 11, 23, 9, 0)
    for bad in ("* * * *", "61 * * * *", "a b c d e", "*/0 * * * *"):
        with pytest.raises(CronError):
            CronSchedule.parse(bad)


@pytest.mark.spec("LLM-39.3")
def test_reindex_optimises_logs_statistics_and_checks_search(embedder, memory_index, caplog):
    memory_index.ensure(embedder.dimension, embedder.model_name)
    memory_index.upsert([VectorPoint("1", embedder.embed(["customer summary"])[0], {})])
    job = ReindexJob(memory_index, embedder, CronSchedule.parse("0 3 * * *"))

    with caplog.at_level("INFO"):
        report = job.run_once()

    assert memory_index.optimized == 1
    assert report["stats"]["vectors"] == 1 and "bytes" in report["stats"]
    assert report["process_max_rss_mb"] > 0
    assert report["search_ok"] and report["search_ms"] >= 0
    assert any("reindex:" in r.message for r in caplog.records)


def test_a_bad_reindex_schedule_fails_at_start_up(tmp_path):
    from pydantic import ValidationError

    from adapters.settings import Settings

    with pytest.raises(ValidationError, match="cron"):
        Settings(REINDEX_SCHEDULE="every night")  # type: ignore[call-arg]
