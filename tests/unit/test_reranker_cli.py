"""The cross-encoder flags of `upstream serve` / `upstream api`: help examples, the curated
list (prints and exits without serving), and flags over environment."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from adapters.settings import Settings
from api.cli import cli, with_cross_encoder_flags
from domain.rerank import CURATED_MODELS, HUB_URL

pytestmark = pytest.mark.unit


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.mark.spec("PRV-10.1")
@pytest.mark.parametrize("command", ["serve", "api"])
def test_cross_encoder_help_shows_fast_recommended_and_high_accuracy_examples(runner, command):
    result = runner.invoke(cli, [command, "--help"], env={"COLUMNS": "250", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "--cross-encoder " in text and "--cross-encoder-path" in text
    for use_case in ("fast", "recommended", "high-accuracy"):
        example = next(m for m in CURATED_MODELS if m.use_case == use_case)
        assert f"{example.name} ({example.size}, {use_case})" in text


@pytest.mark.spec("PRV-10.2", "PRV-10.4")
@pytest.mark.parametrize("command", ["serve", "api"])
def test_list_reranker_models_prints_the_grouped_table_and_exits(runner, command, monkeypatch):
    def must_not_serve(*_args, **_kwargs):
        raise AssertionError("--list-reranker-models must exit before serving")

    monkeypatch.setattr("api.cli._run_http", must_not_serve)
    result = runner.invoke(cli, [command, "--list-reranker-models"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.index("Fast:") < out.index("Recommended:") < out.index("High accuracy:")
    for model in CURATED_MODELS:  # name (HF id), size, latency for 10 documents, accuracy tier
        line = next(x for x in out.splitlines() if model.name in x)
        assert "/" in model.name
        assert model.size in line and model.latency_10_docs in line and model.accuracy in line
    assert "10 documents" in out
    assert "Any Hugging Face cross-encoder model works" in out
    assert HUB_URL in out


@pytest.mark.spec("PRV-11.4")
def test_either_flag_replaces_both_environment_variables(monkeypatch):
    monkeypatch.setenv("CROSS_ENCODER_PATH", "/env/path")
    monkeypatch.setenv("CROSS_ENCODER_MODEL", "org/env-model")
    settings = Settings()
    assert with_cross_encoder_flags(settings, None, None) is settings
    by_name = with_cross_encoder_flags(settings, None, "org/flag")
    assert (by_name.cross_encoder_path, by_name.cross_encoder_model) == (None, "org/flag")
    by_path = with_cross_encoder_flags(settings, "/flag/path", "org/flag")
    assert (by_path.cross_encoder_path, by_path.cross_encoder_model) == ("/flag/path", "org/flag")
