"""The `upstream bench embeddings` and `upstream eval` commands (registered in api/cli.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.questions import DEFAULT_QUESTIONS, QuestionsError, QuestionSet, load_questions

QuestionsFile = Annotated[
    Path, typer.Option("--questions", "-q", help="Ground-truth questions (JSON)")
]
OnlyIds = Annotated[
    list[str] | None, typer.Option("--id", help="Only these question ids (repeatable)")
]
OnlyProjects = Annotated[
    list[str] | None, typer.Option("--project", "-p", help="Only this corpus (repeatable)")
]
OutDir = Annotated[Path, typer.Option("--out", help="Report folder")]
INTERRUPTED = 130


def _setup_logging() -> None:
    """Warnings from libraries; progress lines (upstream.bench, INFO) when not on a terminal."""
    from api.cli import configure_logging

    configure_logging("WARNING")
    logging.getLogger("upstream.bench").setLevel(logging.INFO)


def _questions(path: Path, ids: list[str] | None, projects: list[str] | None) -> QuestionSet:
    try:
        questions = load_questions(path)
    except QuestionsError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    if ids or projects:
        questions = questions.only(set(ids) if ids else None, set(projects) if projects else None)
        if not questions.questions:
            typer.echo("error: no question matches --id/--project", err=True)
            raise typer.Exit(2)
    return questions


def bench_embeddings(
    models: Annotated[
        str,
        typer.Option(
            "--models",
            "-m",
            help="Comma-separated: all-MiniLM-L6-v2, all-MiniLM-L6-v2-int8, all-mpnet-base-v2, "
            "nomic-embed-text, ollama:<model>, st:<folder>",
        ),
    ] = "all-MiniLM-L6-v2,all-MiniLM-L6-v2-int8,all-mpnet-base-v2,nomic-embed-text",
    questions_file: QuestionsFile = DEFAULT_QUESTIONS,
    ids: OnlyIds = None,
    projects: OnlyProjects = None,
    ollama_url: Annotated[
        str | None, typer.Option("--ollama-url", help="Ollama for nomic-embed-text")
    ] = None,
    threads: Annotated[
        int, typer.Option("--threads", min=1, help="CPU threads per in-process model")
    ] = 1,
    out: OutDir = Path("docs/benchmarks"),
    as_json: Annotated[bool, typer.Option("--json", help="Also print the results as JSON")] = False,
) -> None:
    """Embedding models on the ground-truth lineage questions: Precision@5, Recall@5, MRR,
    latency per chunk and per query, memory and size; writes EMBEDDING_RESULTS_<date>.md."""
    from bench.embeddings import model_table, recommend, run_embedding_bench, write_report

    _setup_logging()
    questions = _questions(questions_file, ids, projects)
    names = [m.strip() for m in models.split(",") if m.strip()]
    if not names:
        typer.echo("error: --models names no model", err=True)
        raise typer.Exit(2)
    bench = run_embedding_bench(questions, names, ollama_url=ollama_url, threads=threads)
    report = write_report(bench, out)
    if as_json:
        typer.echo(json.dumps([_model_json(m) for m in bench.models], indent=2))
    typer.echo(model_table(bench.models))
    for m in bench.models:
        if m.status != "ok":
            typer.echo(f"{m.name}: {m.status} — {m.reason}")
    typer.echo(f"\nrecommendation:\n{recommend(bench).text}")
    typer.echo(f"report: {report}" + (" (partial: interrupted)" if bench.interrupted else ""))
    if bench.interrupted:
        raise typer.Exit(INTERRUPTED)


def _model_json(m: Any) -> dict[str, Any]:
    data = asdict(m)
    data.pop("questions")
    data.update(
        precision_at_5=m.precision, recall_at_5=m.recall, mrr=m.mrr, entity_recall=m.entity_recall
    )
    return data


def eval_command(
    pipeline: Annotated[
        list[str] | None,
        typer.Option("--pipeline", help="A retrieval pipeline to evaluate (repeatable)"),
    ] = None,
    questions_file: QuestionsFile = DEFAULT_QUESTIONS,
    ids: OnlyIds = None,
    projects: OnlyProjects = None,
    k: Annotated[int, typer.Option("-k", "--top-k", min=1, max=50, help="Cut-off k")] = 5,
    answers: Annotated[
        bool, typer.Option("--answers", help="Also answer with the chat service and check")
    ] = False,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Embedded data dir to use (default: a temporary one)"),
    ] = None,
    out: OutDir = Path("docs/benchmarks"),
    as_json: Annotated[bool, typer.Option("--json", help="Print per-question JSON")] = False,
) -> None:
    """Run the questions through each named retrieval pipeline (vector, hybrid, ...) on a fresh
    embedded service and compare Precision@k, Recall@k, MRR and latency side by side."""
    from bench.eval import (
        UnknownPipelineName,
        differences,
        run_offline_eval,
        summary_tables,
        write_report,
    )

    _setup_logging()
    names = list(dict.fromkeys(pipeline or ["vector", "hybrid"]))
    questions = _questions(questions_file, ids, projects)
    try:
        run = asyncio.run(
            run_offline_eval(questions, names, k=k, answers=answers, data_dir=data_dir)
        )
    except UnknownPipelineName as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        typer.echo("interrupted before any question was answered", err=True)
        raise typer.Exit(INTERRUPTED) from None
    if as_json:
        typer.echo(json.dumps([asdict(p) for p in run.pipelines], indent=2))
    typer.echo(summary_tables(run))
    typer.echo("")
    typer.echo(differences(run))
    report = write_report(run, out)
    if run.interrupted:
        typer.echo(f"interrupted: {run.done()} of {len(questions.questions)} questions", err=True)
    typer.echo(f"report: {report}")
    sys.stdout.flush()
    if run.interrupted:
        raise typer.Exit(INTERRUPTED)
