"""Score the SQL lineage extractor against the hand-curated JSONL corpus.

Each corpus line is ``{"id", "dialect", "sql", "sources", "targets", "columns"?}``.
A case is *table-exact* when the extracted sources and targets equal the expected
ones as sets, and *column-exact* (only for cases that carry ``columns``) when the
set of column edges is equal too.

Run ``python tests/corpus/sql_lineage/score.py`` from the repository root to print
the per-dialect figures (add ``--failures`` to list the failing cases).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CORPUS_DIR = Path(__file__).resolve().parent


@dataclass
class _Tally:
    cases: int = 0
    statements: int = 0
    table_exact: int = 0
    column_cases: int = 0
    column_exact: int = 0
    seconds: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)

    def rates(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "statements": self.statements,
            "table_exact": self.table_exact,
            "table_exact_rate": self.table_exact / self.cases if self.cases else 1.0,
            "column_cases": self.column_cases,
            "column_exact": self.column_exact,
            "column_exact_rate": (
                self.column_exact / self.column_cases if self.column_cases else 1.0
            ),
            "seconds": round(self.seconds, 4),
        }


def corpus_paths(directory: Path = CORPUS_DIR) -> list[Path]:
    """All ``<dialect>.jsonl`` files of the corpus, sorted by name."""
    return sorted(directory.glob("*.jsonl"))


def load_cases(paths: Iterable[Path | str]) -> list[dict[str, Any]]:
    """Read corpus cases from JSONL files (blank lines ignored)."""
    cases: list[dict[str, Any]] = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                cases.append(json.loads(line))
    return cases


def _edges(columns: Iterable[dict[str, str]]) -> set[tuple[str, str]]:
    return {(edge["source"], edge["target"]) for edge in columns}


def score_corpus(paths: Iterable[Path | str] | None = None) -> dict[str, Any]:
    """Run the extractor over the corpus and return per-dialect and overall figures.

    Returns ``{"dialects": {name: rates}, "overall": rates, "failures": [...]}`` where
    ``rates`` has ``cases``, ``statements``, ``table_exact_rate``, ``column_cases``,
    ``column_exact_rate`` and ``seconds`` (extraction time).
    """
    from domain.lineage import extract_sql_lineage

    cases = load_cases(corpus_paths() if paths is None else paths)
    per_dialect: dict[str, _Tally] = {}
    overall = _Tally()
    for case in cases:
        dialect = case["dialect"]
        tally = per_dialect.setdefault(_family(dialect), _Tally())
        started = time.perf_counter()
        result = extract_sql_lineage(case["sql"], None if dialect == "ansi" else dialect)
        elapsed = time.perf_counter() - started
        outcome = _compare(case, result.to_json())
        for target in (tally, overall):
            target.cases += 1
            target.statements += len(result.statements)
            target.seconds += elapsed
            target.table_exact += outcome["table_ok"]
            if "columns" in case:
                target.column_cases += 1
                target.column_exact += outcome["columns_ok"]
        if not (outcome["table_ok"] and outcome["columns_ok"]):
            failure = {"id": case["id"], **outcome["diff"], "warnings": result.warnings}
            tally.failures.append(failure)
            overall.failures.append(failure)
    return {
        "dialects": {name: tally.rates() for name, tally in sorted(per_dialect.items())},
        "overall": overall.rates(),
        "failures": overall.failures,
    }


def _family(dialect: str) -> str:
    return "spark" if dialect == "sparksql" else dialect


def _compare(case: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    diff: dict[str, Any] = {}
    table_ok = True
    for key in ("sources", "targets"):
        expected, actual = set(case[key]), set(got[key])
        if expected != actual:
            table_ok = False
            diff[key] = {"missing": sorted(expected - actual), "extra": sorted(actual - expected)}
    columns_ok = True
    if "columns" in case:
        expected_edges, actual_edges = _edges(case["columns"]), _edges(got["columns"])
        if expected_edges != actual_edges:
            columns_ok = False
            diff["columns"] = {
                "missing": sorted(expected_edges - actual_edges),
                "extra": sorted(actual_edges - expected_edges),
            }
    return {"table_ok": table_ok, "columns_ok": columns_ok, "diff": diff}


def format_table(report: dict[str, Any]) -> str:
    """Markdown table of the per-dialect figures plus the overall row."""
    lines = [
        "| dialect | cases | statements | table-exact | column cases | column-exact |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    rows = [*report["dialects"].items(), ("**overall**", report["overall"])]
    for name, rates in rows:
        lines.append(
            f"| {name} | {rates['cases']} | {rates['statements']} "
            f"| {rates['table_exact_rate']:.1%} | {rates['column_cases']} "
            f"| {rates['column_exact_rate']:.1%} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print the figures; ``--failures`` also prints every failing case."""
    repository = CORPUS_DIR.parents[2]
    if str(repository) not in sys.path:
        sys.path.insert(0, str(repository))
    report = score_corpus()
    print(format_table(report))
    overall = report["overall"]
    rate = overall["statements"] / overall["seconds"] if overall["seconds"] else 0.0
    print(f"\n{overall['statements']} statements in {overall['seconds']:.2f}s ({rate:.0f}/s)")
    if "--failures" in argv:
        for failure in report["failures"]:
            print(json.dumps(failure, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
