"""SIGKILL mid-ingest: every file present exactly once, and a replay equals the live read model."""

from __future__ import annotations

import pytest

from bench.crash import run_crash_check

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_sigkill_mid_ingest_then_reingest_is_exactly_once_and_replay_is_identical(tmp_path):
    report = run_crash_check(tmp_path, files=200, kill_after=0.4)

    assert 0 < report.sent_before_kill < report.files  # the kill landed mid-ingest
    assert not report.nats_orphaned, "the embedded nats-server outlived its parent"
    assert report.missing_files == []
    assert report.duplicated_chunks == []
    assert report.wrong_chunk_counts == []
    assert report.extra_ingests == []  # unchanged files recorded nothing the second time
    assert report.replay_identical, report.replay_difference  # vectors and graph alike
    assert report.graph_edges > 0
