"""`upstream eval` on the real service: a fresh embedded container ingests the shipped `shop`
corpus, and the vector and hybrid pipelines the chat service answers with are compared."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.eval import render_report, run_offline_eval
from bench.questions import load_questions

pytestmark = pytest.mark.integration


@pytest.mark.spec("LLM-08.3")
def test_vector_and_hybrid_are_validated_side_by_side_on_the_same_ingested_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_SEED_PROFILE", "local")  # offline answers: the extractive entry
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:9")  # no Ollama here
    questions = load_questions().only(projects={"shop"})
    run = asyncio.run(
        run_offline_eval(
            questions, ["vector", "hybrid"], k=5, answers=True, data_dir=tmp_path / "data"
        )
    )
    assert not run.interrupted
    assert run.setup["files"] == 9
    vector, hybrid = run.pipelines
    assert len(vector.outcomes) == len(hybrid.outcomes) == len(questions.questions)
    by_id = {o.id: (v, o) for v, o in zip(vector.outcomes, hybrid.outcomes, strict=True)}
    # the vector pipeline finds where net_revenue is computed
    assert by_id["shop-02"][0].reciprocal_rank == 1.0
    # "what breaks if stg_orders changes" spans three hops: only the graph reaches them all
    plain, graph = by_id["shop-06"]
    assert plain.facts == 0 and graph.facts > 0
    assert graph.evidence_file_recall > plain.evidence_file_recall
    assert "graph" in graph.timings_ms and "graph" not in plain.timings_ms
    answers = hybrid.answers()
    assert len(answers) == len(questions.questions)
    assert not [a.error for a in answers if a.error]
    assert any(a.evidence_entity_recall > 0 for a in answers)
    text = render_report(run, "today")
    assert "| vector |" in text and "| hybrid |" in text and "entities in evidence" in text
