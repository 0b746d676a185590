"""SIGKILL `upstream serve` in the middle of emptying a 5,000-document collection: after a
restart the collection holds all its documents or none, never part of them (PRV-09.5)."""

from __future__ import annotations

import pytest

from bench.collections_crash import METADATA, run_empty_crash_check

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.spec("PRV-09.5")
def test_killing_the_service_mid_empty_leaves_all_or_none(tmp_path):
    report = run_empty_crash_check(tmp_path, documents=5_000)

    assert report.answered_before_kill[0] is False  # the first kill landed before the answer
    assert report.answered_before_kill[1] is True  # the second after the event was recorded
    assert report.all_or_none, (report.counts_after_restart, report.counts_seen_while_running)
    assert report.counts_after_restart[1] == 0  # a recorded emptying is applied after restart
    assert report.documents in report.counts_seen_while_running  # readers saw the full set...
    assert report.metadata_after_restart == [METADATA, METADATA]  # metadata always kept
    assert report.final_count == 0 and report.final_count_deleted in (0, report.documents)
    assert report.generations_left == 1  # no orphaned generation on disk
