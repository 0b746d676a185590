"""Retrieval metrics against the answer key, and progress reporting of long runs."""

from __future__ import annotations

import io
import logging

import pytest

from bench.metrics import (
    entities_found,
    entity_recall,
    file_recall,
    percentile,
    score_ranking,
)
from bench.progress import Progress

pytestmark = pytest.mark.unit


@pytest.mark.spec("LLM-36.1")
def test_precision_recall_and_reciprocal_rank_judge_items_by_their_file() -> None:
    retrieved = ["b.sql", "a.sql", "a.sql", "c.yml", "x.sql", "d.sql"]
    score = score_ranking(retrieved, ["a.sql", "d.sql"], k=5)
    assert score.precision == pytest.approx(2 / 5)  # two a.sql chunks in the top 5
    assert score.recall == pytest.approx(1 / 2)  # d.sql is sixth: outside the top 5
    assert score.reciprocal_rank == pytest.approx(1 / 2)
    assert score.first_relevant_rank == 2


def test_nothing_relevant_in_the_top_k_scores_zero() -> None:
    score = score_ranking(["x", "y"], ["a"], k=5)
    assert (score.precision, score.recall, score.reciprocal_rank) == (0.0, 0.0, 0.0)
    assert score.first_relevant_rank is None
    with pytest.raises(ValueError):
        score_ranking(["x"], ["a"], k=0)


def test_paths_compare_without_a_leading_dot_slash_or_case() -> None:
    assert score_ranking(["./Models/A.sql"], ["models/a.sql"], 1).reciprocal_rank == 1.0
    assert file_recall(["b", "./a"], ["a", "c"]) == 0.5


def test_entities_are_found_as_whole_identifiers_only() -> None:
    texts = ["select * from {{ source('shop', 'orders') }}", "ref('stg_shop__customers')"]
    found = entities_found(texts, ["orders", "customers", "stg_shop__customers", "shop.orders"])
    assert found == ["orders", "stg_shop__customers"]
    assert entity_recall(texts, ["orders", "payments"]) == 0.5
    assert entity_recall(texts, []) == 0.0


def test_percentiles_interpolate() -> None:
    assert percentile([], 95) == 0.0
    assert percentile([4.0], 95) == 4.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert percentile([0.0, 10.0], 95) == pytest.approx(9.5)


def test_progress_draws_a_bar_on_a_terminal() -> None:
    stream = io.StringIO()
    with Progress("model", 4, stream=stream, tty=True, width=4) as bar:
        bar.advance(2, "chunks")
    out = stream.getvalue()
    assert "\rmodel [##..] 2/4" in out
    assert out.endswith("\n")


def test_progress_logs_periodic_lines_elsewhere(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="upstream.bench")
    bar = Progress("eval", 3, stream=io.StringIO(), tty=False, interval=3600)
    bar.advance()  # within the interval: quiet
    bar.advance()
    bar.close()  # stopped early: says where
    bar.advance()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("eval: stopped at 2/3")
    assert lines[1].startswith("eval: 3/3")  # the last step always logs
