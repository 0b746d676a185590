"""`upstream eval`: named retrieval pipelines side by side on the ground-truth questions.

This is the spec's "side-by-side validation" of two RAG implementations (LLM-08.3): the
pipelines (`vector`, `hybrid`, ...) are the objects the chat service answers with, called
with the retrieval request the deep intent builds, on the same questions, and scored against
the same answer key (bench/metrics.py). `--answers` also runs the chat service (the code
behind `POST /api/chat/deep`) once per pipeline and checks that the expected entities appear
in the evidence of its answer.

Design: the harness starts its own embedded container (SQLite events, embedded nats-server,
Qdrant local mode, LadybugDB) on a temporary data dir, ingests the question set's corpora
through the command bus exactly as `upstream ingest` does, waits for the read models, then
calls the pipelines in process. Nothing depends on a running service or its state, every
pipeline sees the same read models, and the per-stage timings (`timings_ms`) come back with
each retrieval; rolling back is choosing the other name (`RAG_PIPELINE`).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from bench.metrics import (
    entities_found,
    entity_recall,
    file_recall,
    mean,
    percentile,
    score_ranking,
)
from bench.progress import Progress
from bench.questions import Question, QuestionSet, iter_corpus

log = logging.getLogger("upstream.bench")

DEFAULT_K = 5


@dataclass
class AnswerCheck:
    """One chat answer through one pipeline: do the expected entities reach its evidence?"""

    evidence_entity_recall: float = 0.0
    answer_entity_recall: float = 0.0
    evidence_file_recall: float = 0.0
    grounded: bool = False
    action: str = ""
    latency_ms: float = 0.0
    missing_entities: list[str] = field(default_factory=list)
    error: str = ""


@dataclass
class QuestionOutcome:
    id: str
    precision: float
    recall: float
    reciprocal_rank: float
    evidence_file_recall: float
    entity_recall: float
    latency_ms: float
    timings_ms: dict[str, float]
    retrieved: list[str]
    sources: int = 0
    facts: int = 0
    warnings: list[str] = field(default_factory=list)
    answer: AnswerCheck | None = None


@dataclass
class PipelineRun:
    name: str
    description: str = ""
    outcomes: list[QuestionOutcome] = field(default_factory=list)

    def metric(self, attribute: str) -> float:
        return mean(float(getattr(o, attribute)) for o in self.outcomes)

    def latency(self, q: float) -> float:
        return percentile([o.latency_ms for o in self.outcomes], q)

    def stage_ms(self) -> dict[str, float]:
        stages: dict[str, list[float]] = {}
        for outcome in self.outcomes:
            for stage, ms in outcome.timings_ms.items():
                stages.setdefault(stage, []).append(ms)
        return {stage: mean(values) for stage, values in sorted(stages.items())}

    def answers(self) -> list[AnswerCheck]:
        return [o.answer for o in self.outcomes if o.answer is not None]


@dataclass
class EvalRun:
    questions: QuestionSet
    k: int
    pipelines: list[PipelineRun]
    answered: bool = False
    interrupted: bool = False
    setup: dict[str, Any] = field(default_factory=dict)

    def done(self) -> int:
        return min((len(p.outcomes) for p in self.pipelines), default=0)


# -- running the questions -----------------------------------------------------------------


def _deep_hops() -> int:
    try:
        from domain.answering.intents import Intent, profile

        return int(profile(Intent.DEEP).graph_hops)
    except (ImportError, ValueError, KeyError, AttributeError):  # pragma: no cover
        return 2


def retrieval_query(question: Question, k: int, hops: int) -> Any:
    """The request the deep chat intent sends its pipeline (queries/chat.py `_retrieve`)."""
    from queries.retrieval import RetrievalQuery

    return RetrievalQuery(
        text=question.question,
        intent="deep",
        project_id=question.project,
        top_k=k,
        hops=hops,
        question=question.question,
    )


def score_retrieval(
    question: Question, retrieval: Any, k: int, latency_ms: float
) -> QuestionOutcome:
    """Rank = the retrieval's sources in prompt order (graph nodes, then chunks), each by the
    file it comes from; evidence = those sources and the files of the graph facts."""
    ranked = [s.document_name for s in retrieval.sources]
    ranking = score_ranking(ranked, question.expected_files, k)
    evidence_files = ranked + [f.file_path for f in retrieval.facts if f.file_path]
    texts = [f"{s.document_name}\n{s.text}" for s in retrieval.sources]
    texts += [f"{f.source_name} -> {f.target_name}" for f in retrieval.facts]
    texts += list(retrieval.entities)
    return QuestionOutcome(
        id=question.id,
        precision=ranking.precision,
        recall=ranking.recall,
        reciprocal_rank=ranking.reciprocal_rank,
        evidence_file_recall=file_recall(evidence_files, question.expected_files),
        entity_recall=entity_recall(texts, question.expected_entities),
        latency_ms=latency_ms,
        timings_ms=dict(retrieval.timings_ms),
        retrieved=ranked[:k],
        sources=len(retrieval.sources),
        facts=len(retrieval.facts),
        warnings=list(retrieval.warnings),
    )


async def check_answer(
    chat: Any, question: Question, pipeline: str, k: int | None = None
) -> AnswerCheck:
    """Ask the deep chat endpoint's service through `pipeline` (retrieving `k` chunks, as the
    retrieval comparison does); look for the expected entities in the evidence it cites (URNs
    and notes) and in the answer text."""
    from domain.answering.intents import Intent
    from queries.chat import ChatQuery

    began = time.perf_counter()
    try:
        reply = await chat.answer(
            ChatQuery(
                query=question.question,
                intent=Intent.DEEP,
                project_id=question.project,
                skip_memory=True,
                pipeline=pipeline,
                top_k=k,
            )
        )
    except Exception as error:  # one failed answer is a result, not the end of the run
        return AnswerCheck(error=f"{type(error).__name__}: {error}")
    body = reply.body
    latency = (time.perf_counter() - began) * 1000
    evidence = [f"{e.get('id', '')}\n{e.get('note', '')}" for e in body.get("evidence", [])]
    evidence_paths = [_urn_path(str(e.get("id", ""))) for e in body.get("evidence", [])]
    found = entities_found(evidence, question.expected_entities)
    meta = body.get("metadata", {})
    return AnswerCheck(
        evidence_entity_recall=entity_recall(evidence, question.expected_entities),
        answer_entity_recall=entity_recall(
            [str(body.get("answer", ""))], question.expected_entities
        ),
        evidence_file_recall=file_recall(evidence_paths, question.expected_files),
        grounded=bool(meta.get("grounded")),
        action=str(meta.get("action", "")),
        latency_ms=latency,
        missing_entities=[e for e in question.expected_entities if e not in found],
    )


def _urn_path(urn: str) -> str:
    """`urn:li:chunk:proj:models/a.sql#0` -> `models/a.sql` (other URNs: their asset part)."""
    parts = urn.split(":", 4)
    asset = parts[4] if len(parts) == 5 else urn
    return asset.split("#", 1)[0]


async def evaluate(
    pipelines: Mapping[str, Any],
    names: Sequence[str],
    questions: QuestionSet,
    *,
    k: int = DEFAULT_K,
    chat: Any = None,
    progress: Callable[[str, int], Progress] | None = None,
) -> EvalRun:
    """Each question through each pipeline in turn (interleaved, so drifting load hits all
    alike). Ctrl-C (KeyboardInterrupt, or the task cancelled by asyncio.run's SIGINT handler)
    ends the loop; the questions finished by every pipeline are kept."""
    missing = [n for n in names if n not in pipelines]
    if missing:
        raise UnknownPipelineName(missing, sorted(pipelines))
    hops = _deep_hops()
    runs = {n: PipelineRun(n, str(getattr(pipelines[n], "description", ""))) for n in names}
    run = EvalRun(questions, k, list(runs.values()), answered=chat is not None)
    make = progress or (lambda label, total: Progress(label, total))
    bar = make("eval " + " vs ".join(names), len(questions.questions))
    try:
        for question in questions.questions:
            for name in names:
                began = time.perf_counter()
                retrieval = await pipelines[name].retrieve(retrieval_query(question, k, hops))
                latency = (time.perf_counter() - began) * 1000
                outcome = score_retrieval(question, retrieval, k, latency)
                if chat is not None:
                    outcome.answer = await check_answer(chat, question, name, k)
                runs[name].outcomes.append(outcome)
            bar.advance(1, question.id)
    except (KeyboardInterrupt, asyncio.CancelledError):
        run.interrupted = True
        done = run.done()
        for pipeline_run in run.pipelines:
            del pipeline_run.outcomes[done:]
    finally:
        bar.close("interrupted" if run.interrupted else "")
    return run


class UnknownPipelineName(ValueError):
    def __init__(self, missing: Sequence[str], known: Sequence[str]) -> None:
        super().__init__(
            f"no retrieval pipeline named {', '.join(missing)}; known: {', '.join(known)}"
        )
        self.missing, self.known = list(missing), list(known)


# -- the service under test ----------------------------------------------------------------


def pipelines_of(container: Any) -> dict[str, Any]:
    """The pipelines the chat service answers with."""
    from queries import retrieval

    return dict(retrieval.build_pipelines(container))


def offline_settings(data_dir: Path) -> Any:
    """The embedded profile on `data_dir`, whatever servers the environment names: the
    evaluation never writes into a production bus, event store, index or cache."""
    from adapters.settings import Settings

    return Settings(
        UPSTREAM_DATA_DIR=data_dir,
        NATS_URL=None,
        PERSISTENCE_MODULE="eventsourcing.sqlite",
        QDRANT_URL=None,
        QDRANT_PATH=None,
        NEO4J_URI=None,
        GRAPH_PATH=None,
        REDIS_URL=None,
        REINDEX_SCHEDULE=None,
        # each pipeline pays for its own query embedding: with the cache on, the pipeline
        # asked second would get the first one's vector for free
        USE_EMBEDDING_CACHE=False,
    )


async def ingest_corpora(
    container: Any,
    questions: QuestionSet,
    progress: Callable[[str, int], Progress] | None = None,
) -> dict[str, Any]:
    """Send every corpus file as an `IngestFile` command (dbt_project.yml first, the corpus's
    dialect), then wait until every read model has applied the last event."""
    from bus.subjects import CMD_INGEST_FILE
    from commands.models import IngestFile

    items = list(iter_corpus(questions))
    make = progress or (lambda label, total: Progress(label, total))
    began = time.perf_counter()
    position = 0
    with make("ingest", len(items)) as bar:
        for spec, item in items:
            command = IngestFile(
                project_id=spec.project,
                path=item.path,
                content=item.content,
                source="eval",
                dialect=spec.dialect,
            )
            result = await container.command_bus.send(CMD_INGEST_FILE, command)
            position = max(position, int(result.position or 0))
            bar.advance(1)
    await container.wait_for(position, 1800)
    return {"files": len(items), "ingest_s": round(time.perf_counter() - began, 2)}


async def run_offline_eval(
    questions: QuestionSet,
    names: Sequence[str],
    *,
    k: int = DEFAULT_K,
    answers: bool = False,
    data_dir: Path | None = None,
    progress: Callable[[str, int], Progress] | None = None,
) -> EvalRun:
    """Start an embedded container on `data_dir` (a temporary one by default), ingest the
    corpora, evaluate, stop. Ctrl-C during the questions keeps what finished."""
    from adapters.bootstrap import bootstrap
    from bench.embeddings import quiet_model_loading

    quiet_model_loading()
    with tempfile.TemporaryDirectory(prefix="upstream-eval-") as tmp:
        settings = offline_settings(data_dir or Path(tmp))
        container = bootstrap(settings, "serve")
        await container.start()
        try:
            setup = await ingest_corpora(container, questions, progress)
            pipelines = pipelines_of(container)
            chat = container.chat if answers else None
            if answers and chat is None:
                raise RuntimeError("this build has no chat service: run without --answers")
            run = await evaluate(pipelines, names, questions, k=k, chat=chat, progress=progress)
            run.setup = setup
            return run
        finally:
            await container.stop()


# -- report --------------------------------------------------------------------------------

_RETRIEVAL_COLUMNS: list[tuple[str, Callable[[PipelineRun], float], bool, str]] = [
    ("Precision@k", lambda p: p.metric("precision"), True, "{:.3f}"),
    ("Recall@k", lambda p: p.metric("recall"), True, "{:.3f}"),
    ("MRR", lambda p: p.metric("reciprocal_rank"), True, "{:.3f}"),
    ("evidence file recall", lambda p: p.metric("evidence_file_recall"), True, "{:.3f}"),
    ("entity recall", lambda p: p.metric("entity_recall"), True, "{:.3f}"),
    ("latency mean ms", lambda p: p.metric("latency_ms"), False, "{:.1f}"),
    ("p50 ms", lambda p: p.latency(50), False, "{:.1f}"),
    ("p95 ms", lambda p: p.latency(95), False, "{:.1f}"),
]


def _table(
    runs: Sequence[PipelineRun],
    columns: Sequence[tuple[str, Callable[[PipelineRun], float], bool, str]],
    k: int,
) -> str:
    titles = [c[0].replace("@k", f"@{k}") for c in columns]
    lines = ["| pipeline | " + " | ".join(titles) + " |", "|---|" + "---:|" * len(columns)]
    best: dict[str, str] = {}
    for title, value, higher, fmt in columns:
        values = [value(r) for r in runs]
        if values and len(runs) > 1:
            best[title] = fmt.format(max(values) if higher else min(values))
    for r in runs:
        cells = []
        for title, value, _, fmt in columns:
            text = fmt.format(value(r))
            cells.append(f"**{text}**" if best.get(title) == text else text)
        lines.append(f"| {r.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _answer_columns() -> list[tuple[str, Callable[[PipelineRun], float], bool, str]]:
    def avg(attribute: str) -> Callable[[PipelineRun], float]:
        return lambda p: mean(float(getattr(a, attribute)) for a in p.answers())

    return [
        ("entities in evidence", avg("evidence_entity_recall"), True, "{:.3f}"),
        ("entities in answer", avg("answer_entity_recall"), True, "{:.3f}"),
        ("expected files cited", avg("evidence_file_recall"), True, "{:.3f}"),
        ("grounded share", avg("grounded"), True, "{:.3f}"),
        ("answer latency ms", avg("latency_ms"), False, "{:.0f}"),
    ]


def summary_tables(run: EvalRun) -> str:
    parts = [_table(run.pipelines, _RETRIEVAL_COLUMNS, run.k)]
    stages = sorted({s for p in run.pipelines for s in p.stage_ms()})
    if stages:
        parts += [
            "",
            "Mean time per retrieval stage (ms, from `timings_ms`):",
            "",
            "| pipeline | " + " | ".join(stages) + " |",
            "|---|" + "---:|" * len(stages),
        ]
        for p in run.pipelines:
            ms = p.stage_ms()
            parts.append(
                f"| {p.name} | " + " | ".join(f"{ms.get(s, 0.0):.1f}" for s in stages) + " |"
            )
    kinds = by_question_type(run)
    if kinds:
        parts += ["", "By kind of question:", "", kinds]
    if run.answered:
        parts += ["", f"Answers (`--answers`, the deep chat service, top_k={run.k}):", ""]
        parts.append(_table(run.pipelines, _answer_columns(), run.k))
    return "\n".join(parts)


def by_question_type(run: EvalRun) -> str:
    """MRR and evidence file recall per kind of question (upstream, downstream, definition)."""
    kinds = sorted({q.type for q in run.questions.questions})
    if not run.done() or not kinds:
        return ""
    type_of = {q.id: q.type for q in run.questions.questions}
    header = (
        "| question type | questions | "
        + " | ".join(f"{p.name} MRR / evidence" for p in run.pipelines)
        + " |"
    )
    lines = [header, "|---|---:|" + "---:|" * len(run.pipelines)]
    for kind in kinds:
        cells = []
        count = 0
        for p in run.pipelines:
            chosen = [o for o in p.outcomes if type_of.get(o.id) == kind]
            count = len(chosen)
            cells.append(
                f"{mean(o.reciprocal_rank for o in chosen):.3f} / "
                f"{mean(o.evidence_file_recall for o in chosen):.3f}"
            )
        lines.append(f"| {kind} | {count} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def differences(run: EvalRun) -> str:
    """Per question, where the pipelines disagree (reciprocal rank, recall, evidence)."""
    if len(run.pipelines) < 2:
        return "One pipeline: nothing to compare."
    names = [p.name for p in run.pipelines]
    header = (
        "| question | "
        + " | ".join(f"{n} RR / R@{run.k} / evidence / entities" for n in names)
        + " | better |"
    )
    lines = [header, "|---|" + "---|" * (len(names) + 1)]
    same = 0
    for index in range(run.done()):
        outcomes = [p.outcomes[index] for p in run.pipelines]
        keys = [_key(o) for o in outcomes]
        if len(set(keys)) == 1:
            same += 1
            continue
        best = max(range(len(names)), key=lambda i: keys[i])
        ties = [i for i in range(len(names)) if keys[i] == keys[best]]
        better = names[best] if len(ties) == 1 else "tie"
        cells = [
            f"{o.reciprocal_rank:.2f} / {o.recall:.2f} / {o.evidence_file_recall:.2f} / "
            f"{o.entity_recall:.2f}"
            for o in outcomes
        ]
        lines.append(f"| {outcomes[0].id} | " + " | ".join(cells) + f" | {better} |")
    lines.append("")
    lines.append(f"{same} of {run.done()} questions score the same on every pipeline.")
    return "\n".join(lines)


def _key(o: QuestionOutcome) -> tuple[float, ...]:
    return (
        round(o.reciprocal_rank, 3),
        round(o.recall, 3),
        round(o.evidence_file_recall, 3),
        round(o.entity_recall, 3),
    )


def render_report(run: EvalRun, day: str) -> str:
    q = run.questions
    names = " vs ".join(p.name for p in run.pipelines)
    title = f"# Retrieval pipelines: {names} ({day})"
    if run.interrupted:
        title += f" — PARTIAL ({run.done()} of {len(q.questions)} questions)"
    descriptions = "\n".join(f"- `{p.name}`: {p.description}" for p in run.pipelines)
    setup = run.setup
    return "\n".join(
        [
            title,
            "",
            f"{len(q.questions)} questions from `{_shown(q.source)}` over "
            + ", ".join(f"`{c.project}` ({_shown(c.path)})" for c in q.corpora)
            + (
                f": {setup.get('files')} files ingested in {setup.get('ingest_s')} s"
                if setup
                else ""
            )
            + " into a fresh embedded service (SQLite events, embedded NATS, Qdrant local, "
            "LadybugDB, all-MiniLM-L6-v2). Each question goes to each pipeline as the deep chat "
            f"intent sends it (project-scoped, top_k={run.k}).",
            "",
            descriptions,
            "",
            "## Side by side",
            "",
            summary_tables(run),
            "",
            "Best value per column in **bold**.",
            "",
            "## Per-question differences",
            "",
            differences(run),
            "",
            "## How the numbers are measured",
            "",
            f"- The ranking is the retrieval's `sources` in prompt order (graph nodes first in "
            f"`hybrid`, then chunks), each judged by its file. Precision@{run.k}, "
            f"Recall@{run.k} and MRR are computed on its first {run.k} items "
            "(bench/metrics.py).",
            "- evidence file recall: expected files among all the evidence returned (every "
            "source, and the file each graph fact was read from), at any rank.",
            "- entity recall: expected entity names found, as whole identifiers, in the "
            "sources' text, the graph facts and the entities matched from the question.",
            "- latency: wall time of one `retrieve()` call, embedding included; the stage table "
            "splits it as the pipeline reports it.",
            "",
            "Reproduce: `upstream eval --pipeline vector --pipeline hybrid`"
            + (" --answers" if run.answered else "")
            + ".",
            "",
        ]
    )


def write_report(run: EvalRun, out_dir: Path, today: date | None = None) -> Path:
    day = (today or date.today()).isoformat()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"EVAL_{'_'.join(p.name for p in run.pipelines)}_{day}.md"
    path.write_text(render_report(run, day))
    return path


def _shown(path: Path) -> str:
    from bench.questions import REPO_ROOT

    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)
