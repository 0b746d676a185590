"""The shipped ground-truth lineage questions: shape, coverage, and that the answer key is
true of the corpus it is about."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.metrics import entities_found
from bench.questions import DEFAULT_QUESTIONS, QuestionsError, load_questions

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def shipped():
    return load_questions(DEFAULT_QUESTIONS)


@pytest.mark.spec("LLM-36.2")
def test_the_shipped_questions_load_from_json_with_files_and_entities(shipped) -> None:
    assert shipped.source.suffix == ".json"
    assert len(shipped.questions) >= 40
    for question in shipped.questions:
        assert question.question.strip().endswith("?"), question.id
        assert question.expected_files, question.id
        assert question.expected_entities, question.id


@pytest.mark.spec("LLM-36.2")
def test_the_questions_cover_tables_views_columns_procedures_ctes_models_and_sources(
    shipped,
) -> None:
    covered = shipped.covered_kinds()
    for kind in ("table", "view", "column", "procedure", "cte", "dbt_model", "source"):
        assert covered.get(kind, 0) >= 4, kind
    assert {c.project for c in shipped.corpora} == {"dbt_shop", "shop", "warehouse"}


@pytest.mark.spec("LLM-36.2")
def test_every_expected_file_is_a_corpus_file_that_ingestion_would_take(shipped) -> None:
    files = {spec.project: {f.path for f in spec.files()} for spec in shipped.corpora}
    for question in shipped.questions:
        for path in question.expected_files:
            assert path in files[question.project], (question.id, path)


@pytest.mark.spec("LLM-36.2")
def test_every_expected_entity_is_named_in_the_questions_own_corpus(shipped) -> None:
    """The key was curated from the files: each entity is written in one of them (or is the
    name of one), so a retrieval can find it."""
    texts = {
        spec.project: [f"{f.path}\n{f.content}" for f in spec.files()] for spec in shipped.corpora
    }
    for question in shipped.questions:
        found = entities_found(texts[question.project], question.expected_entities)
        assert found == list(question.expected_entities), question.id


def test_the_answer_key_of_the_dbt_corpus_is_left_out_of_what_is_retrieved(shipped) -> None:
    dbt = shipped.corpus("dbt_shop")
    assert "expected_edges.json" not in {f.path for f in dbt.files()}


def test_a_subset_keeps_only_the_corpora_its_questions_need(shipped) -> None:
    subset = shipped.only(projects={"shop"})
    assert {q.project for q in subset.questions} == {"shop"}
    assert [c.project for c in subset.corpora] == ["shop"]
    assert [q.id for q in shipped.only(ids={"wh-01"}).questions] == ["wh-01"]


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "q.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{not json", "is not JSON"),
        ({"questions": []}, "missing or wrong"),
        (
            {
                "corpora": [{"project": "a", "path": "."}],
                "questions": [
                    {
                        "id": "x",
                        "project": "b",
                        "question": "?",
                        "expected_files": ["f"],
                        "expected_entities": [],
                    }
                ],
            },
            "has no corpus",
        ),
        (
            {
                "corpora": [{"project": "a", "path": "."}],
                "questions": [
                    {
                        "id": "x",
                        "project": "a",
                        "question": "?",
                        "expected_files": ["f"],
                        "expected_entities": [],
                    },
                    {
                        "id": "x",
                        "project": "a",
                        "question": "?",
                        "expected_files": ["f"],
                        "expected_entities": [],
                    },
                ],
            },
            "duplicate question ids",
        ),
    ],
)
def test_a_bad_questions_file_is_refused_with_what_is_wrong(
    tmp_path: Path, data: object, message: str
) -> None:
    with pytest.raises(QuestionsError, match=message):
        load_questions(_write(tmp_path, data))


def test_a_missing_questions_file_says_which(tmp_path: Path) -> None:
    with pytest.raises(QuestionsError, match="cannot read questions file"):
        load_questions(tmp_path / "nope.json")


def test_corpus_paths_of_another_file_are_relative_to_that_file(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.sql").write_text("select 1")
    path = _write(
        tmp_path,
        {
            "corpora": [{"project": "p", "path": "corpus"}],
            "questions": [
                {
                    "id": "x",
                    "project": "p",
                    "question": "?",
                    "expected_files": ["a.sql"],
                    "expected_entities": [],
                }
            ],
        },
    )
    questions = load_questions(path)
    assert [f.path for f in questions.corpus("p").files()] == ["a.sql"]
