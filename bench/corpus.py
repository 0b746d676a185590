"""A deterministic synthetic repository of SQL, Python and Markdown files, with needles."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

_DOMAINS = [
    "orders",
    "customers",
    "payments",
    "shipments",
    "invoices",
    "refunds",
    "products",
    "inventory",
    "campaigns",
    "sessions",
    "subscriptions",
    "suppliers",
]
_MEASURES = [
    "amount",
    "quantity",
    "discount",
    "tax",
    "net_revenue",
    "gross_margin",
    "fees",
    "unit_price",
    "shipping_cost",
    "balance",
]
_WORDS = [
    "ledger",
    "reconcile",
    "cohort",
    "window",
    "snapshot",
    "late",
    "arriving",
    "dedupe",
    "currency",
    "region",
    "fiscal",
    "weekly",
    "rollup",
    "backfill",
    "surrogate",
    "grain",
]


@dataclass(frozen=True, slots=True)
class Needle:
    phrase: str
    path: str


def _sql_model(rng: random.Random, n: int) -> str:
    domain = rng.choice(_DOMAINS)
    other = rng.choice(_DOMAINS)
    cols = rng.sample(_MEASURES, 4)
    lines = [
        f"-- model {n}: {domain} joined to {other} ({' '.join(rng.sample(_WORDS, 3))})",
        f"create or replace view analytics.{domain}_summary_{n} as",
        f"with base_{n} as (",
        "    select",
        f"        t.{domain}_id,",
        *[f"        sum(t.{c}) as total_{c}," for c in cols],
        f"        count(*) as row_count_{n}",
        f"    from staging.stg_{domain} t",
        f"    join staging.stg_{other} o on o.{domain}_id = t.{domain}_id",
        f"    where t.updated_at >= date '2024-0{rng.randint(1, 9)}-01'",
        f"    group by t.{domain}_id",
        ")",
        f"select * from base_{n}",
        f"where row_count_{n} > {rng.randint(1, 100)};",
    ]
    for extra in range(rng.randint(0, 40)):
        lines.append(f"-- note {extra}: {' '.join(rng.choices(_WORDS, k=8))}")
    return "\n".join(lines) + "\n"


def _python_module(rng: random.Random, n: int) -> str:
    domain = rng.choice(_DOMAINS)
    body = [f'"""Pipeline step {n} for {domain}."""', "", "import pandas as pd", ""]
    for f in range(rng.randint(2, 6)):
        measure = rng.choice(_MEASURES)
        body += [
            f"def compute_{measure}_{n}_{f}(frame: pd.DataFrame) -> pd.DataFrame:",
            f'    """{" ".join(rng.sample(_WORDS, 4))}."""',
            f"    frame['{measure}_{f}'] = frame['{measure}'] * {rng.random():.3f}",
            f"    return frame[frame['{domain}_id'].notna()]",
            "",
        ]
    return "\n".join(body) + "\n"


def _markdown(rng: random.Random, n: int) -> str:
    domain = rng.choice(_DOMAINS)
    paragraphs = [f"# {domain.title()} notes {n}", ""]
    for _ in range(rng.randint(2, 8)):
        paragraphs += [" ".join(rng.choices(_WORDS + _MEASURES + _DOMAINS, k=40)), ""]
    return "\n".join(paragraphs)


_NEEDLES = [
    "the quarterly flamingo reconciliation uses a velvet tolerance of three basis points",
    "kerosene lighthouse budget forecast for the Antarctic subsidiary",
    "saxophone warranty claims are excluded from the churn cohort",
]


def generate(root: Path, files: int = 200, seed: int = 7) -> list[Needle]:
    """Write `files` files under `root`; returns where each needle phrase was planted."""
    rng = random.Random(seed)
    makers = [
        ("models", ".sql", _sql_model),
        ("pipelines", ".py", _python_module),
        ("docs", ".md", _markdown),
    ]
    paths: list[Path] = []
    for n in range(files):
        folder, suffix, make = makers[n % 3]
        path = root / folder / f"{folder[:-1]}_{n:04d}{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make(rng, n))
        paths.append(path)
    needles = []
    for k, phrase in enumerate(_NEEDLES):
        target = paths[(k * 67 + 11) % len(paths)]
        comment = "--" if target.suffix == ".sql" else "#"
        lines = target.read_text().splitlines()
        lines.insert(min(3, len(lines)), f"{comment} {phrase}")
        target.write_text("\n".join(lines) + "\n")
        needles.append(Needle(phrase, target.relative_to(root).as_posix()))
    return needles
