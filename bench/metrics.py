"""Retrieval quality against a hand-curated answer key: Precision@k, Recall@k, MRR, entities.

Every retrieved item (a chunk, a graph node) is judged by the file it comes from: it is
relevant when that file is one of the question's expected files.

- Precision@k: relevant items among the first k, divided by k.
- Recall@k: distinct expected files among the first k items, divided by the expected files.
- Reciprocal rank: 1 / the rank of the first relevant item within the first k, else 0; MRR
  is its mean over the questions.
- Entity recall: expected entity names found (case-insensitive, whole identifier) in the
  texts given, divided by the expected entities.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RankingScore:
    precision: float
    recall: float
    reciprocal_rank: float
    first_relevant_rank: int | None


def score_ranking(retrieved: Sequence[str], expected: Iterable[str], k: int) -> RankingScore:
    """Score the file paths of retrieved items, best first, against the expected files."""
    if k <= 0:
        raise ValueError("k must be positive")
    wanted = {_normal(p) for p in expected}
    top = [_normal(p) for p in retrieved[:k]]
    relevant = [p in wanted for p in top]
    first = next((rank for rank, hit in enumerate(relevant, start=1) if hit), None)
    found = {p for p in top if p in wanted}
    return RankingScore(
        precision=sum(relevant) / k,
        recall=len(found) / len(wanted) if wanted else 0.0,
        reciprocal_rank=1.0 / first if first else 0.0,
        first_relevant_rank=first,
    )


def file_recall(files: Iterable[str], expected: Iterable[str]) -> float:
    """Expected files present anywhere in `files` (no rank cut-off)."""
    wanted = {_normal(p) for p in expected}
    if not wanted:
        return 0.0
    return len(wanted & {_normal(p) for p in files}) / len(wanted)


def entities_found(texts: Iterable[str], entities: Sequence[str]) -> list[str]:
    """The expected entities that appear in the texts as a whole identifier: `orders` is found
    in `from orders o` and in `shop.orders`, not in `stg_shop__orders`."""
    haystack = "\n".join(texts).lower()
    return [e for e in entities if _identifier(e).search(haystack)]


def entity_recall(texts: Iterable[str], entities: Sequence[str]) -> float:
    if not entities:
        return 0.0
    return len(entities_found(texts, entities)) / len(entities)


def mean(values: Iterable[float]) -> float:
    items = list(values)
    return statistics.fmean(items) if items else 0.0


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; 0.0 for no values."""
    items = sorted(values)
    if not items:
        return 0.0
    if len(items) == 1:
        return items[0]
    position = (len(items) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(items) - 1)
    return items[low] + (items[high] - items[low]) * (position - low)


def _normal(path: str) -> str:
    return path.strip().removeprefix("./").lower()


def _identifier(entity: str) -> re.Pattern[str]:
    return re.compile(r"(?<![a-z0-9_])" + re.escape(entity.lower()) + r"(?![a-z0-9_])")
