"""`upstream bench embeddings` on a small corpus with stand-in models (the real MiniLM run is
in tests/integration/test_bench_embeddings_minilm.py): metrics, report, skipped models,
recommendation, interruption, and the split-zip model packages."""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import pytest

from bench import embedding_models
from bench.embedding_models import (
    ModelUnavailable,
    OllamaModel,
    join_split_zip,
    resolve_model,
)
from bench.embeddings import (
    EmbeddingBench,
    ModelResult,
    QuestionResult,
    corpus_chunks,
    recommend,
    render_report,
    run_embedding_bench,
    write_report,
)
from bench.questions import load_questions
from bus.nats_server import free_port

pytestmark = pytest.mark.unit

CORPUS = {
    "models/orders.sql": "-- orders with payments\nselect o.order_id, p.amount as paid\n"
    "from {{ ref('stg_orders') }} o join {{ ref('stg_payments') }} p using (order_id)\n",
    "models/stg_orders.sql": "select id as order_id, status from {{ source('raw', 'orders') }}\n",
    "models/stg_payments.sql": "select id, order_id, amount from {{ source('raw', 'payments') }}\n",
    "docs/refunds.md": "# Refunds\n\nRefunds are negative payments.\n",
}
QUESTIONS = [
    ("q1", "where are orders joined with payments", ["models/orders.sql"], ["stg_payments"]),
    ("q2", "refunds negative payments", ["docs/refunds.md"], ["refunds"]),
    ("q3", "order status source", ["models/stg_orders.sql"], ["status", "orders"]),
]


@pytest.fixture
def questions(tmp_path: Path):
    for path, text in CORPUS.items():
        (tmp_path / "corpus" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "corpus" / path).write_text(text)
    data = {
        "corpora": [{"project": "p", "path": "corpus"}],
        "questions": [
            {
                "id": i,
                "project": "p",
                "question": q + "?",
                "expected_files": f,
                "expected_entities": e,
            }
            for i, q, f, e in QUESTIONS
        ],
    }
    (tmp_path / "q.json").write_text(json.dumps(data))
    return load_questions(tmp_path / "q.json")


class WordsModel:
    """A stand-in embedder: normalised counts of hashed words (same word, same dimension)."""

    backend = "test words"
    dimension = 64

    def __init__(self, name: str = "words", size: int = 10_000_000, fail_on: int = -1) -> None:
        self.name = name
        self.size = size
        self.calls = 0
        self.fail_on = fail_on

    def check(self) -> None:
        return None

    def import_runtime(self) -> None:
        return None

    def load(self) -> None:
        return None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == self.fail_on:
            raise KeyboardInterrupt
        out = []
        for text in texts:
            vector = [0.0] * self.dimension
            for word in re.findall(r"[a-z]+", text.lower()):
                vector[sum(map(ord, word)) % self.dimension] += 1.0
            norm = sum(x * x for x in vector) ** 0.5 or 1.0
            out.append([x / norm for x in vector])
        return out

    def size_on_disk(self) -> int:
        return self.size


def _with_models(monkeypatch: pytest.MonkeyPatch, models: dict[str, object]) -> None:
    real = embedding_models.resolve_model

    def resolve(name: str, ollama_url: str | None = None, threads: int = 1):
        return models[name] if name in models else real(name, ollama_url, threads)

    monkeypatch.setattr("bench.embeddings.resolve_model", resolve)


def _count(text: str) -> int:
    return len(text.split()) + 2


@pytest.mark.spec("LLM-36.1")
def test_each_model_retrieves_the_top_5_chunks_and_is_scored_against_the_key(
    monkeypatch: pytest.MonkeyPatch, questions
) -> None:
    monkeypatch.setattr("bench.embeddings.minilm_token_counter", lambda: _count)
    _with_models(monkeypatch, {"words": WordsModel()})
    bench = run_embedding_bench(questions, ["words"])
    [result] = bench.models
    assert result.status == "ok"
    assert [q.id for q in result.questions] == ["q1", "q2", "q3"]
    for q in result.questions:
        assert len(q.retrieved) == min(5, len(bench.chunks))
        assert 0.0 <= q.precision <= 1.0 and 0.0 <= q.recall <= 1.0
    assert result.questions[1].reciprocal_rank == 1.0  # the refunds doc is the best match
    assert result.mrr == pytest.approx(sum(q.reciprocal_rank for q in result.questions) / 3)
    assert result.chunk_ms > 0 and result.query_ms > 0 and result.query_p95_ms >= 0
    assert result.size_bytes == 10_000_000 and result.dimension == 64


@pytest.mark.spec("LLM-36.1")
def test_the_corpus_is_cut_by_the_ingestion_chunker_and_embedded_with_its_path(
    questions,
) -> None:
    from domain.chunkers import chunk_file

    chunks, files = corpus_chunks(questions, _count)
    assert files == len(CORPUS)
    expected = sum(len(chunk_file(p, t, count_tokens=_count)) for p, t in CORPUS.items())
    assert len(chunks) == expected
    assert all(c.text.startswith(c.path + "\n") for c in chunks)


@pytest.mark.spec("LLM-36.3", "LLM-36.4")
def test_the_report_has_a_model_table_best_per_metric_a_ranking_and_is_saved_by_date(
    monkeypatch: pytest.MonkeyPatch, questions, tmp_path: Path
) -> None:
    monkeypatch.setattr("bench.embeddings.minilm_token_counter", lambda: _count)
    small, big = WordsModel("small", size=1_000_000), WordsModel("big", size=500_000_000)
    _with_models(monkeypatch, {"small": small, "big": big})
    bench = run_embedding_bench(questions, ["small", "big", "nonsense-model"])
    path = write_report(bench, tmp_path / "out", today=date(2026, 1, 2))
    assert path.name == "EMBEDDING_RESULTS_2026-01-02.md"
    text = path.read_text()
    assert "| model | backend | dim | Precision@5 | Recall@5 | MRR |" in text
    assert "ms / chunk" in text and "RSS Δ peak MB" in text and "size on disk MB" in text
    small_row = next(line for line in text.splitlines() if line.startswith("| small |"))
    assert "**1.0**" in small_row  # the smaller size on disk is the best of its column
    assert "Ranking by quality" in text and "## Recommendation" in text
    # a model that cannot run is reported with its reason, never dropped
    assert re.search(r"\| nonsense-model \| skipped \| unknown model 'nonsense-model'", text)
    assert "## Per question" in text and "| q1 |" in text


def _result(name: str, quality: float, chunk_ms: float, size: int) -> ModelResult:
    result = ModelResult(name=name, status="ok", chunk_ms=chunk_ms, size_bytes=size)
    result.questions = [QuestionResult("q", 0.2, quality, quality, 1.0, [])]
    return result


@pytest.mark.spec("LLM-36.4")
def test_the_recommendation_weighs_quality_against_latency_and_size(questions) -> None:
    close = EmbeddingBench(
        questions,
        [],
        0,
        [
            _result("accurate", 0.80, chunk_ms=20.0, size=400_000_000),
            _result("fast", 0.78, chunk_ms=4.0, size=90_000_000),
        ],
    )
    pick = recommend(close)
    assert pick.model == "fast"  # 0.02 worse, 5x faster and smaller: not worth the cost
    assert "does not pay for the cost" in pick.text
    far = EmbeddingBench(
        questions,
        [],
        0,
        [
            _result("accurate", 0.90, chunk_ms=20.0, size=400_000_000),
            _result("fast", 0.70, chunk_ms=4.0, size=90_000_000),
        ],
    )
    assert recommend(far).model == "accurate"
    nothing = EmbeddingBench(questions, [], 0, [ModelResult("x", "skipped", reason="r")])
    assert recommend(nothing).model is None


def test_the_report_says_whether_the_recommendation_is_the_default(questions) -> None:
    same = EmbeddingBench(questions, [], 0, [_result("all-MiniLM-L6-v2", 0.8, 4.0, 90)])
    assert "the default stays as it is" in render_report(same, "d")
    other = EmbeddingBench(questions, [], 0, [_result("all-mpnet-base-v2", 0.9, 4.0, 90)])
    assert "stays all-MiniLM-L6-v2, not all-mpnet-base-v2" in render_report(other, "d")


def test_ctrl_c_keeps_the_finished_models_and_marks_the_report_partial(
    monkeypatch: pytest.MonkeyPatch, questions
) -> None:
    monkeypatch.setattr("bench.embeddings.minilm_token_counter", lambda: _count)
    _with_models(monkeypatch, {"a": WordsModel("a"), "b": WordsModel("b", fail_on=1)})
    bench = run_embedding_bench(questions, ["a", "b", "c"])
    assert bench.interrupted
    assert [(m.name, m.status) for m in bench.models] == [
        ("a", "ok"),
        ("b", "interrupted"),
        ("c", "interrupted"),
    ]
    assert "PARTIAL (interrupted)" in render_report(bench, "d")


@pytest.mark.spec("LLM-36.4")
def test_an_unreachable_ollama_is_a_skip_with_the_reason() -> None:
    model = OllamaModel("nomic-embed-text", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ModelUnavailable, match=r"Ollama not reachable at http://127\.0\.0\.1"):
        model.check()


def test_missing_model_packages_are_skips_that_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(embedding_models, "MPNET_PARTS", ("no-such-upstream-model-part-001",))
    with pytest.raises(ModelUnavailable, match="no-such-upstream-model-part-001 not installed"):
        resolve_model("all-mpnet-base-v2").check()
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)
    with pytest.raises(ModelUnavailable, match="not installed: make bench-embeddings"):
        resolve_model("minilm-int8").check()


def _split_zip(tmp_path: Path, parts: int) -> list[Path]:
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("m/config.json", "{}")
        z.writestr("m/1_Pooling/config.json", '{"pooling": "mean"}')
        z.writestr("m/desktop.ini", "junk")
    data = archive.read_bytes()
    size = len(data) // parts + 1
    paths = []
    for n in range(parts):
        part = tmp_path / f"model.zip.{n + 1:03d}"
        part.write_bytes(data[n * size : (n + 1) * size])
        paths.append(part)
    return paths


def test_a_zip_split_across_packages_is_joined_and_unpacked_once(tmp_path: Path) -> None:
    parts = _split_zip(tmp_path, 3)
    folder = join_split_zip(parts, tmp_path / "cache", "m")
    assert folder == tmp_path / "cache" / "m"
    assert (folder / "1_Pooling" / "config.json").read_text() == '{"pooling": "mean"}'
    assert not (folder / "desktop.ini").exists()
    (folder / "config.json").write_text("kept")  # a second call reuses the folder
    assert join_split_zip(parts, tmp_path / "cache", "m") == folder
    assert (folder / "config.json").read_text() == "kept"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["m"]  # no temporary left


def test_parts_out_of_order_are_not_a_zip(tmp_path: Path) -> None:
    parts = _split_zip(tmp_path, 3)
    with pytest.raises(ModelUnavailable, match="not a zip archive"):
        join_split_zip(list(reversed(parts)), tmp_path / "cache", "m")
