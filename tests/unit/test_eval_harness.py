"""`upstream eval`'s harness on stand-in pipelines (the real vector and hybrid pipelines run in
tests/integration/test_eval_pipelines.py): side-by-side metrics, per-question differences,
answers checked against the expected entities, and Ctrl-C."""

from __future__ import annotations

import asyncio
import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from bench.eval import (
    UnknownPipelineName,
    check_answer,
    differences,
    evaluate,
    render_report,
    summary_tables,
    write_report,
)
from bench.questions import load_questions
from domain.answering.context import ContextSource, GraphFact
from queries.retrieval import Retrieval, RetrievalQuery

pytestmark = pytest.mark.unit


@pytest.fixture
def questions(tmp_path: Path):
    (tmp_path / "c").mkdir()
    for name in ("a.sql", "b.sql", "c.sql"):
        (tmp_path / "c" / name).write_text(f"-- {name}\nselect 1")
    data = {
        "corpora": [{"project": "p", "path": "c"}],
        "questions": [
            {
                "id": "q1",
                "project": "p",
                "question": "What feeds a?",
                "expected_files": ["a.sql"],
                "expected_entities": ["b_model"],
            },
            {
                "id": "q2",
                "project": "p",
                "question": "What breaks if b changes?",
                "expected_files": ["b.sql", "c.sql"],
                "expected_entities": ["c_model"],
            },
        ],
    }
    (tmp_path / "q.json").write_text(json.dumps(data))
    return load_questions(tmp_path / "q.json")


def _chunk(path: str, text: str = "") -> ContextSource:
    return ContextSource(
        source_id=f"{path}:0",
        urn=f"urn:li:chunk:p:{path}#0",
        kind="chunk",
        document_id=path,
        document_name=path,
        chunk_index=0,
        text=text,
        score=0.5,
        chunk_type="sql_statement",
        line_start=1,
        line_end=2,
        tags=(),
    )


class ScriptedPipeline:
    """Answers each question with fixed sources (and facts), like a real pipeline would."""

    def __init__(self, name: str, script: dict[str, Retrieval]) -> None:
        self.name = name
        self.description = f"scripted {name}"
        self.script = script
        self.seen: list[RetrievalQuery] = []

    async def retrieve(self, query: RetrievalQuery) -> Retrieval:
        self.seen.append(query)
        await asyncio.sleep(0)
        scripted = self.script[query.text]
        return Retrieval(
            sources=list(scripted.sources),
            facts=list(scripted.facts),
            entities=list(scripted.entities),
            timings_ms={"embedding": 1.0, "retrieval": 2.0},
        )


def _pipelines() -> dict[str, ScriptedPipeline]:
    fact = GraphFact(
        source_urn="urn:li:dataset:p:c_model",
        source_name="c_model",
        source_kind="dbt_model",
        rel="READS_FROM",
        target_urn="urn:li:dataset:p:b_model",
        target_name="b_model",
        target_kind="dbt_model",
        confidence=1.0,
        provenance="deterministic",
        file_path="c.sql",
    )
    vector = ScriptedPipeline(
        "vector",
        {
            "What feeds a?": Retrieval(sources=[_chunk("x.sql"), _chunk("a.sql", "from b_model")]),
            "What breaks if b changes?": Retrieval(sources=[_chunk("b.sql")]),
        },
    )
    hybrid = ScriptedPipeline(
        "hybrid",
        {
            "What feeds a?": Retrieval(sources=[_chunk("x.sql"), _chunk("a.sql", "from b_model")]),
            "What breaks if b changes?": Retrieval(
                sources=[_chunk("b.sql")], facts=[fact], entities=["b_model"]
            ),
        },
    )
    return {"vector": vector, "hybrid": hybrid}


@pytest.mark.spec("LLM-08.3")
def test_two_pipelines_run_the_same_questions_and_are_compared_side_by_side(questions) -> None:
    pipelines = _pipelines()
    run = asyncio.run(evaluate(pipelines, ["vector", "hybrid"], questions, k=5))
    vector, hybrid = run.pipelines
    assert [o.id for o in vector.outcomes] == [o.id for o in hybrid.outcomes] == ["q1", "q2"]
    assert vector.outcomes[0].reciprocal_rank == 0.5  # a.sql second
    assert vector.outcomes[1].recall == 0.5 and hybrid.outcomes[1].recall == 0.5
    # the graph fact read from c.sql brings the second expected file into the evidence
    assert vector.outcomes[1].evidence_file_recall == 0.5
    assert hybrid.outcomes[1].evidence_file_recall == 1.0
    assert hybrid.outcomes[1].entity_recall == 1.0 and vector.outcomes[1].entity_recall == 0.0
    # the request is the deep intent's, scoped to the question's project
    sent = pipelines["hybrid"].seen[0]
    assert (sent.intent, sent.project_id, sent.top_k, sent.question) == (
        "deep",
        "p",
        5,
        "What feeds a?",
    )
    table = summary_tables(run)
    assert "| pipeline | Precision@5 | Recall@5 | MRR | evidence file recall |" in table
    assert "| hybrid |" in table and "| vector |" in table
    assert "| embedding | retrieval |" in table
    assert "| question type | questions |" in table  # upstream / downstream side by side
    diff = differences(run)
    assert "| q2 |" in diff and diff.splitlines()[2].endswith("| hybrid |")
    assert "| q1 |" not in diff  # same on both: not a difference
    assert "1 of 2 questions score the same on every pipeline." in diff


@pytest.mark.spec("LLM-08.3")
def test_the_comparison_report_is_written_with_the_table_and_differences(
    questions, tmp_path: Path
) -> None:
    run = asyncio.run(evaluate(_pipelines(), ["vector", "hybrid"], questions))
    path = write_report(run, tmp_path, today=date(2026, 3, 4))
    assert path.name == "EVAL_vector_hybrid_2026-03-04.md"
    text = path.read_text()
    assert "## Side by side" in text and "## Per-question differences" in text
    assert "- `hybrid`: scripted hybrid" in text


def test_an_unknown_pipeline_name_lists_the_known_ones(questions) -> None:
    with pytest.raises(UnknownPipelineName, match="no retrieval pipeline named graph_only"):
        asyncio.run(evaluate(_pipelines(), ["vector", "graph_only"], questions))


def test_ctrl_c_keeps_the_questions_every_pipeline_finished(questions) -> None:
    pipelines: dict[str, Any] = _pipelines()

    class Interrupted(ScriptedPipeline):
        async def retrieve(self, query: RetrievalQuery) -> Retrieval:
            if query.text == "What breaks if b changes?":
                raise KeyboardInterrupt
            return await super().retrieve(query)

    pipelines["hybrid"] = Interrupted("hybrid", pipelines["hybrid"].script)
    run = asyncio.run(evaluate(pipelines, ["vector", "hybrid"], questions))
    assert run.interrupted
    assert [len(p.outcomes) for p in run.pipelines] == [1, 1]  # q2 dropped from both
    assert "PARTIAL (1 of 2 questions)" in render_report(run, "d")


class ChatStandIn:
    """The chat service's `answer` contract: a body with answer, evidence and metadata."""

    def __init__(self) -> None:
        self.queries: list[Any] = []

    async def answer(self, query: Any) -> Any:
        self.queries.append(query)
        body = {
            "answer": "a.sql reads b_model.",
            "evidence": [
                {"type": "chunk", "id": "urn:li:chunk:p:a.sql#0", "note": "from b_model"},
            ],
            "metadata": {"grounded": True, "action": "CITE"},
        }
        return type("Answer", (), {"body": body})()


@pytest.mark.spec("LLM-08.3")
def test_answers_are_checked_for_the_expected_entities_in_their_evidence(questions) -> None:
    chat = ChatStandIn()
    run = asyncio.run(evaluate(_pipelines(), ["vector", "hybrid"], questions, chat=chat))
    assert [q.pipeline for q in chat.queries] == ["vector", "hybrid", "vector", "hybrid"]
    assert all(q.skip_memory and q.project_id == "p" and q.top_k == 5 for q in chat.queries)
    first = run.pipelines[0].outcomes[0].answer
    assert first is not None
    assert first.evidence_entity_recall == 1.0  # b_model is in the cited evidence
    assert first.evidence_file_recall == 1.0  # a.sql is cited
    assert first.grounded and first.action == "CITE"
    second = run.pipelines[0].outcomes[1].answer
    assert second is not None and second.missing_entities == ["c_model"]
    assert "entities in evidence" in summary_tables(run)


def test_a_failing_answer_is_recorded_not_fatal(questions) -> None:
    class Broken:
        async def answer(self, query: Any) -> Any:
            raise RuntimeError("model down")

    check = asyncio.run(check_answer(Broken(), questions.questions[0], "vector"))
    assert check.error == "RuntimeError: model down"
