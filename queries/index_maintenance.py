"""Scheduled index maintenance (REINDEX_SCHEDULE): optimise, log statistics, check search."""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from domain.index_tuning import CronSchedule, recommended_hnsw
from domain.ports import Embedder, VectorIndex

log = logging.getLogger(__name__)

PROBE = "which tables feed the customer summary"


class ReindexJob:
    """Runs `run_once` whenever the cron schedule fires."""

    def __init__(
        self,
        index: VectorIndex,
        embedder: Embedder,
        schedule: CronSchedule,
        now: Callable[[], datetime] = datetime.now,
    ) -> None:
        self.index = index
        self.embedder = embedder
        self.schedule = schedule
        self.now = now
        self.last_report: dict[str, Any] | None = None
        self._task: asyncio.Task[None] | None = None

    def run_once(self) -> dict[str, Any]:
        started = time.perf_counter()
        self.index.optimize()
        optimise_s = time.perf_counter() - started
        stats = self.index.stats()
        probe = self.embedder.embed([PROBE])[0]
        searched = time.perf_counter()
        hits = self.index.search(probe, 5)
        report = {
            "at": self.now().isoformat(timespec="seconds"),
            "optimise_s": round(optimise_s, 3),
            "stats": stats,
            "process_max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "recommended_hnsw": recommended_hnsw(int(stats.get("vectors", 0))).to_dict(),
            "search_ok": bool(hits) or int(stats.get("vectors", 0)) == 0,
            "search_ms": round((time.perf_counter() - searched) * 1000, 2),
        }
        log.info("reindex: %s", report)
        if not report["search_ok"]:
            log.error("reindex: search returned nothing from a non-empty collection")
        self.last_report = report
        return report

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="reindex")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            now = self.now()
            due = self.schedule.next_after(now)
            await asyncio.sleep(max(0.0, (due - now).total_seconds()))
            try:
                await asyncio.to_thread(self.run_once)
            except Exception:
                log.exception("reindex failed; next run at the next schedule")
