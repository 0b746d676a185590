"""Vector index tuning: HNSW settings per corpus size, and a small cron schedule."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True, slots=True)
class HnswConfig:
    m: int
    ef_construct: int

    def to_dict(self) -> dict[str, int]:
        return {"m": self.m, "ef_construct": self.ef_construct}


_TIERS = ((10_000, HnswConfig(16, 100)), (100_000, HnswConfig(24, 150)))
_LARGEST = HnswConfig(32, 200)


def recommended_hnsw(vector_count: int) -> HnswConfig:
    """<10k: m=16/ef=100; 10k-100k: m=24/ef=150; >100k: m=32/ef=200."""
    for limit, config in _TIERS:
        if vector_count < limit:
            return config
    return _LARGEST


def tier_of(vector_count: int) -> int:
    return sum(1 for limit, _ in _TIERS if vector_count >= limit)


class CronError(ValueError):
    """A REINDEX_SCHEDULE that is not a 5-field cron expression."""


_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day", 1, 31), ("month", 1, 12), ("weekday", 0, 6))


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """Standard 5-field cron (`m h dom mon dow`, with `*`, lists, ranges and steps; Sunday=0)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]

    @classmethod
    def parse(cls, text: str) -> CronSchedule:
        parts = text.split()
        if len(parts) != 5:
            raise CronError(
                f"{text!r} is not a cron expression: expected 5 fields (m h dom mon dow)"
            )
        values = [_field(p, name, lo, hi) for p, (name, lo, hi) in zip(parts, _FIELDS, strict=True)]
        return cls(*values)

    def matches(self, moment: datetime) -> bool:
        weekday = (moment.weekday() + 1) % 7  # Python: Monday=0; cron: Sunday=0
        return (
            moment.minute in self.minutes
            and moment.hour in self.hours
            and moment.day in self.days
            and moment.month in self.months
            and weekday in self.weekdays
        )

    def next_after(self, moment: datetime) -> datetime:
        candidate = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
        for _ in range(366 * 24 * 60):
            if self.matches(candidate):
                return candidate
            candidate += timedelta(minutes=1)
        raise CronError("the schedule never fires")


def _field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        values |= _item(item, name, low, high)
    return frozenset(values)


def _item(item: str, name: str, low: int, high: int) -> set[int]:
    span, _, step_text = item.partition("/")
    try:
        step = int(step_text) if step_text else 1
        if span == "*":
            start, end = low, high
        elif "-" in span:
            start, end = (int(x) for x in span.split("-", 1))
        else:
            start = end = int(span)
    except ValueError as error:
        raise CronError(f"cron {name} field {item!r} is not a number, range or step") from error
    if step < 1 or start < low or end > high or start > end:
        raise CronError(f"cron {name} field {item!r} is outside {low}-{high}")
    return set(range(start, end + 1, step))
