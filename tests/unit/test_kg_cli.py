"""What `upstream ingest` prints about KG enrichment, and the `upstream kg` commands, against a
fake HTTP client (the routes themselves are proven in tests/integration)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from api import cli as cli_module
from api.cli import cli

pytestmark = pytest.mark.unit

OFF = {"enabled": False, "head": 5, "runs": 0, "running": 0, "pending_files": 0}
DONE = {
    "enabled": True,
    "head": 12,
    "runs": 2,
    "running": 0,
    "pending_files": 0,
    "files": 2,
    "proposed": 3,
    "accepted": 1,
    "dropped": 2,
    "failed": 0,
    "models_used": ["kg-model"],
    "confidence": {"min": 0.4, "median": 0.675, "max": 0.95},
}


class FakeClient:
    def __init__(self, summaries: list[dict[str, Any]]) -> None:
        self.summaries = summaries
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def get(self, path: str, **params: Any) -> tuple[int, dict[str, Any]]:
        self.calls.append((path, params))
        assert path == "/api/v1/kg/summary"
        return 200, self.summaries.pop(0) if len(self.summaries) > 1 else self.summaries[0]

    def post(self, path: str, json: Any, **params: Any) -> tuple[int, dict[str, Any]]:
        assert path == "/api/v1/ingest"
        files = [{"path": f["path"], "accepted": True, "changed": True} for f in json["files"]]
        return 200, {"position": 11, "files": files}


def run_ingest(tmp_path, monkeypatch, summaries, *args: str) -> tuple[Any, FakeClient]:
    (tmp_path / "load.sql").write_text("insert into a select * from b")
    client = FakeClient(summaries)
    monkeypatch.setattr(cli_module, "_client", lambda _url: client)
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path), "--project", "shop", *args])
    return result, client


@pytest.mark.spec("LLM-11.3")
def test_ingest_prints_the_enrichment_counts_model_and_confidence(tmp_path, monkeypatch):
    result, client = run_ingest(tmp_path, monkeypatch, [{**DONE, "head": 5}, DONE])
    assert result.exit_code == 0, result.output
    line = result.output.strip().splitlines()[-1]
    assert line == (
        "kg enrichment: done: 2 files, 3 proposed, 1 accepted, 2 dropped, 0 failed open, "
        "model kg-model, confidence min 0.40 / median 0.68 / max 0.95 "
        "(review: upstream kg list -p shop)"
    )
    assert client.calls[-1][1]["after_position"] == 5  # only this ingest's runs


def test_ingest_says_nothing_about_enrichment_when_it_is_off(tmp_path, monkeypatch):
    result, _ = run_ingest(tmp_path, monkeypatch, [OFF])
    assert result.exit_code == 0 and "kg enrichment" not in result.output
    json_result, _ = run_ingest(tmp_path, monkeypatch, [OFF], "--json")
    assert '"enabled": false' in json_result.output


def test_ingest_reports_enrichment_still_running_without_waiting(tmp_path, monkeypatch):
    busy = {**DONE, "pending_files": 1, "running": 0, "runs": 1}
    result, _ = run_ingest(tmp_path, monkeypatch, [{**DONE, "head": 5}, busy])
    assert "kg enrichment: so far:" in result.output
    assert "1 files still being enriched" in result.output
