"""The ground-truth lineage questions and the corpora they are asked over.

The questions file (`benchmarks/lineage_questions.json`) names its corpora (a folder, the
project id it is ingested as, its SQL dialect, files to leave out) and, per question, the
files a person needs to answer it and the entity names a correct answer mentions. Paths are
relative to the corpus root, exactly as `upstream ingest <root>` names the files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from commands.sources.local import LocalFile, walk

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_QUESTIONS = REPO_ROOT / "benchmarks" / "lineage_questions.json"
MAX_FILE_BYTES = 1_000_000


class QuestionsError(ValueError):
    """The questions file is missing, not JSON, or not in the expected shape."""


@dataclass(frozen=True, slots=True)
class CorpusSpec:
    """One folder of the corpus, ingested as project `project`."""

    project: str
    path: Path
    dialect: str | None = None
    exclude: tuple[str, ...] = ()

    def files(self) -> list[LocalFile]:
        """The text files ingestion would take from the folder, minus `exclude`."""
        if not self.path.is_dir():
            raise QuestionsError(f"corpus folder {self.path} (project {self.project}) not found")
        return [
            item
            for item in walk(self.path, MAX_FILE_BYTES)
            if isinstance(item, LocalFile) and not self.excluded(item.path)
        ]

    def excluded(self, path: str) -> bool:
        return any(PurePosixPath(path).match(pattern) for pattern in self.exclude)


@dataclass(frozen=True, slots=True)
class Question:
    """A lineage question with its hand-curated answer key."""

    id: str
    project: str
    question: str
    expected_files: tuple[str, ...]
    expected_entities: tuple[str, ...]
    type: str = "definition"
    covers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class QuestionSet:
    """Questions and the corpora they are about, loaded from one JSON file."""

    source: Path
    corpora: tuple[CorpusSpec, ...]
    questions: tuple[Question, ...]

    def corpus(self, project: str) -> CorpusSpec:
        for spec in self.corpora:
            if spec.project == project:
                return spec
        raise QuestionsError(f"no corpus for project {project!r} in {self.source}")

    def only(self, ids: set[str] | None = None, projects: set[str] | None = None) -> QuestionSet:
        """A subset: the questions with one of `ids` / of one of `projects`, and their corpora."""
        questions = tuple(
            q
            for q in self.questions
            if (ids is None or q.id in ids) and (projects is None or q.project in projects)
        )
        used = {q.project for q in questions}
        corpora = tuple(c for c in self.corpora if c.project in used)
        return QuestionSet(self.source, corpora, questions)

    def covered_kinds(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for q in self.questions:
            for kind in q.covers:
                counts[kind] = counts.get(kind, 0) + 1
        return dict(sorted(counts.items()))


def load_questions(path: Path = DEFAULT_QUESTIONS, root: Path | None = None) -> QuestionSet:
    """Read and check a questions file; corpus paths are relative to `root` (default: the
    repository root for the shipped file, else the file's folder)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise QuestionsError(f"cannot read questions file {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise QuestionsError(f"{path} is not JSON: {error}") from None
    if root is None:
        root = REPO_ROOT if path.resolve() == DEFAULT_QUESTIONS.resolve() else path.parent
    try:
        corpora = tuple(_corpus(item, root) for item in data["corpora"])
        questions = tuple(_question(item) for item in data["questions"])
    except (KeyError, TypeError) as error:
        raise QuestionsError(
            f"{path}: expected {{'corpora': [...], 'questions': [...]}} with every field "
            f"(missing or wrong: {error})"
        ) from None
    result = QuestionSet(path, corpora, questions)
    _check(result)
    return result


def _corpus(item: dict[str, Any], root: Path) -> CorpusSpec:
    folder = Path(item["path"])
    return CorpusSpec(
        project=str(item["project"]),
        path=folder if folder.is_absolute() else root / folder,
        dialect=item.get("dialect"),
        exclude=tuple(item.get("exclude") or ()),
    )


def _question(item: dict[str, Any]) -> Question:
    return Question(
        id=str(item["id"]),
        project=str(item["project"]),
        question=str(item["question"]),
        expected_files=tuple(str(p) for p in item["expected_files"]),
        expected_entities=tuple(str(e) for e in item["expected_entities"]),
        type=str(item.get("type", "definition")),
        covers=tuple(item.get("covers") or ()),
    )


def _check(questions: QuestionSet) -> None:
    ids = [q.id for q in questions.questions]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise QuestionsError(f"{questions.source}: duplicate question ids {duplicates}")
    projects = {c.project for c in questions.corpora}
    for q in questions.questions:
        if q.project not in projects:
            raise QuestionsError(f"question {q.id}: project {q.project!r} has no corpus")
        if not q.expected_files:
            raise QuestionsError(f"question {q.id}: expected_files is empty")


def iter_corpus(questions: QuestionSet) -> Iterator[tuple[CorpusSpec, LocalFile]]:
    """Every (corpus, file) of the question set, dbt_project.yml files first per corpus."""
    from commands.sources.local import project_files_first

    for spec in questions.corpora:
        for item in project_files_first(spec.files()):
            yield spec, item
