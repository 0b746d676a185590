"""Crash safety of emptying a collection: SIGKILL `upstream serve` in the middle of
`DELETE /collections/{name}/documents/all`, restart, and check that the collection holds either
all its documents or none, with its metadata, and no orphaned generation.

Two kills on one data dir:

1. while the emptying is being decided and applied (50 ms after the request is sent, with
   `?wait=true`): the answer never comes back; the emptying is recorded or not;
2. right after the write is answered without `?wait=true` (the `CollectionEmptied` event is
   recorded, the projection is applying it or about to): after the restart the projection
   catches up from the event store and the collection is empty.

While the service runs, a reader polls the collection's count: it must only ever see all the
documents or none (the generation switch is one point write).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.service import ServeProcess

COLLECTION = "crash-empty"
METADATA = {"display_name": "Crash test", "query_profile": {"top_k": 5}}


@dataclass
class EmptyCrashReport:
    documents: int
    answered_before_kill: list[bool] = field(default_factory=list)
    counts_after_restart: list[int] = field(default_factory=list)
    metadata_after_restart: list[Any] = field(default_factory=list)
    counts_seen_while_running: set[int] = field(default_factory=set)
    generations_left: int = 0
    final_count_deleted: int = -1
    final_count: int = -1

    @property
    def all_or_none(self) -> bool:
        allowed = {0, self.documents}
        return set(self.counts_after_restart) <= allowed and (
            self.counts_seen_while_running <= allowed
        )


def _fill(url: str, documents: int, batch: int = 1000) -> None:
    with httpx.Client(base_url=url, timeout=300) as client:
        reply = client.post(
            "/collections?wait=true", json={"name": COLLECTION, "metadata": METADATA}
        )
        reply.raise_for_status()
        for start in range(0, documents, batch):
            docs = [
                {
                    "id": f"doc-{i}",
                    "text": f"document {i}",
                    "metadata": {"section": f"s{i // 10}", "order": i},
                    "embedding": [1.0, i % 7, i % 11, i % 13, 0.5, 0.25, (i % 17) / 17, 1.0],
                }
                for i in range(start, min(documents, start + batch))
            ]
            last = start + batch >= documents
            reply = client.post(
                f"/collections/{COLLECTION}/documents",
                params={"wait": str(last).lower()},
                json={"documents": docs},
            )
            reply.raise_for_status()


class _Reader(threading.Thread):
    """Polls the collection's count until stopped or the service goes away."""

    def __init__(self, url: str, seen: set[int]) -> None:
        super().__init__(daemon=True)
        self.url, self.seen, self.stopped = url, seen, threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=5) as client:
            while not self.stopped.is_set():
                try:
                    reply = client.get(f"/collections/{COLLECTION}")
                except httpx.TransportError:
                    return
                if reply.status_code == 200:
                    self.seen.add(int(reply.json()["count"]))


def _delete_in_background(url: str, wait: bool, answered: list[bool]) -> threading.Thread:
    def send() -> None:
        try:
            httpx.delete(
                f"{url}/collections/{COLLECTION}/documents/all",
                params={"wait": str(wait).lower()},
                timeout=120,
            )
            answered.append(True)
        except httpx.TransportError:
            answered.append(False)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def _state(url: str) -> dict[str, Any]:
    reply = httpx.get(f"{url}/collections/{COLLECTION}", timeout=60)
    reply.raise_for_status()
    state: dict[str, Any] = reply.json()
    return state


def run_empty_crash_check(work_dir: Path, documents: int = 20_000) -> EmptyCrashReport:
    data = work_dir / "data"
    report = EmptyCrashReport(documents=documents)
    server = ServeProcess(data)
    server.start()
    try:
        _fill(server.url, documents)

        # 1. killed while the emptying is being decided and applied, before any answer
        reader = _Reader(server.url, report.counts_seen_while_running)
        reader.start()
        answered: list[bool] = []
        sender = _delete_in_background(server.url, True, answered)
        time.sleep(0.05)
        server.kill()
        sender.join(30)
        reader.stopped.set()
        report.answered_before_kill.append(bool(answered and answered[0]))
        server = _restart_and_record(server, data, report)

        # 2. killed right after the event is recorded (answered without waiting)
        if report.counts_after_restart[-1] == 0:  # the first kill came after the recording
            _refill(server.url, documents)
        reader = _Reader(server.url, report.counts_seen_while_running)
        reader.start()
        answered = []
        _delete_in_background(server.url, False, answered).join(60)
        server.kill()
        reader.stopped.set()
        report.answered_before_kill.append(bool(answered and answered[0]))
        server = _restart_and_record(server, data, report)

        # the client retries: the collection ends empty, with its metadata
        retry = httpx.delete(
            f"{server.url}/collections/{COLLECTION}/documents/all?wait=true", timeout=120
        )
        retry.raise_for_status()
        report.final_count_deleted = int(retry.json()["count_deleted"])
        report.final_count = int(_state(server.url)["count"])
        server.stop()
        report.generations_left = _generations(data)
    finally:
        server.stop()
    return report


def _refill(url: str, documents: int) -> None:
    with httpx.Client(base_url=url, timeout=300) as client:
        for start in range(0, documents, 1000):
            docs = [
                {"id": f"doc-{i}", "text": f"again {i}", "embedding": [1.0] * 8}
                for i in range(start, min(documents, start + 1000))
            ]
            last = start + 1000 >= documents
            client.post(
                f"/collections/{COLLECTION}/documents",
                params={"wait": str(last).lower()},
                json={"documents": docs},
            ).raise_for_status()


def _restart_and_record(server: ServeProcess, data: Path, report: EmptyCrashReport) -> ServeProcess:
    """Restart on the same data dir, wait until the projections caught up, record the
    collection's count and metadata; returns the running service."""
    restarted = ServeProcess(data, server.port)
    restarted.start()
    try:
        _caught_up(restarted.url)
        state = _state(restarted.url)
    except Exception:
        restarted.stop()
        raise
    report.counts_after_restart.append(int(state["count"]))
    report.metadata_after_restart.append(state["metadata"])
    return restarted


def _caught_up(url: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        health = httpx.get(f"{url}/health", timeout=10).json()
        lags = [p.get("lag", 0) for p in health["components"]["projections"].values()]
        if not any(lags):
            return
        time.sleep(0.1)
    raise RuntimeError("the projections did not catch up after the restart")


def _generations(data: Path) -> int:
    """Physical Qdrant collections of the user collections left on disk (1 = no orphan)."""
    root = data / "qdrant_collections" / "collection"
    return len(
        [p for p in root.iterdir() if p.name.startswith("col_") and p.name != "col__registry"]
    )
