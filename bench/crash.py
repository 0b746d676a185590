"""Crash safety: SIGKILL `upstream serve` mid-ingest, restart, re-ingest, check, replay, compare."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from adapters.bootstrap import bootstrap
from adapters.settings import Settings
from bench.corpus import generate
from bench.service import ServeProcess, pid_alive
from commands.sources.local import LocalFile, walk


@dataclass
class CrashReport:
    files: int
    sent_before_kill: int
    nats_orphaned: bool
    missing_files: list[str] = field(default_factory=list)
    duplicated_chunks: list[str] = field(default_factory=list)
    wrong_chunk_counts: list[str] = field(default_factory=list)
    extra_ingests: list[str] = field(default_factory=list)
    replay_identical: bool = False
    replay_difference: str = ""
    graph_edges: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        problems = self.missing_files or self.duplicated_chunks or self.wrong_chunk_counts
        return not (problems or self.extra_ingests or self.nats_orphaned) and self.replay_identical


def _post_batches(url: str, files: list[LocalFile], sent: list[int], batch: int = 4) -> None:
    with httpx.Client(timeout=120) as client:
        for start in range(0, len(files), batch):
            chunk = files[start : start + batch]
            body = {
                "project_id": "crash",
                "files": [{"path": f.path, "content": f.content} for f in chunk],
            }
            try:
                client.post(f"{url}/api/v1/ingest", json=body)
            except httpx.TransportError:
                return
            sent[0] += len(chunk)


def run_crash_check(work_dir: Path, files: int = 200, kill_after: float = 0.4) -> CrashReport:
    """Kill the service once `kill_after` of the files are sent; then verify and replay."""
    started = time.monotonic()
    repo, data = work_dir / "repo", work_dir / "data"
    generate(repo, files)
    corpus = [f for f in walk(repo, 10_000_000) if isinstance(f, LocalFile)]

    server = ServeProcess(data)
    server.start()
    nats_pid = server.nats_pid()
    sent = [0]
    sender = threading.Thread(target=_post_batches, args=(server.url, corpus, sent), daemon=True)
    sender.start()
    while sent[0] < len(corpus) * kill_after and sender.is_alive():
        time.sleep(0.01)
    server.kill()
    sender.join(timeout=60)
    time.sleep(0.5)
    orphaned = nats_pid is not None and pid_alive(nats_pid)

    server = ServeProcess(data, server.port)
    server.start()
    _post_batches_wait(server.url, corpus)
    server.stop()

    report = CrashReport(files=len(corpus), sent_before_kill=sent[0], nats_orphaned=orphaned)
    asyncio.run(_verify(data, corpus, report))
    report.seconds = round(time.monotonic() - started, 1)
    return report


def _post_batches_wait(url: str, corpus: list[LocalFile]) -> None:
    with httpx.Client(timeout=600) as client:
        for start in range(0, len(corpus), 50):
            chunk = corpus[start : start + 50]
            body = {
                "project_id": "crash",
                "files": [{"path": f.path, "content": f.content} for f in chunk],
            }
            last = start + 50 >= len(corpus)
            reply = client.post(
                f"{url}/api/v1/ingest", params={"wait": str(last).lower()}, json=body
            )
            reply.raise_for_status()


async def _verify(data: Path, corpus: list[LocalFile], report: CrashReport) -> None:
    settings = Settings(UPSTREAM_DATA_DIR=data)
    container = bootstrap(settings, "offline")
    await container.start()
    try:
        live = container.index.dump()
        expected_chunks = _check_events(container.app, report)
        _check_points(live, corpus, expected_chunks, report)
        live_graph = container.graph.dump()
        await container.replay()
        rebuilt = container.index.dump()
        report.replay_identical, report.replay_difference = _same(live, rebuilt)
        if report.replay_identical and container.graph.dump() != live_graph:
            report.replay_identical, report.replay_difference = False, "graph differs"
        report.graph_edges = len(live_graph[1])
    finally:
        await container.stop()


def _check_points(
    points: list[Any], corpus: list[LocalFile], expected: dict[str, int], report: CrashReport
) -> None:
    by_file: dict[str, list[int]] = {}
    for point in points:
        by_file.setdefault(point.payload["path"], []).append(point.payload["chunk_index"])
    for f in corpus:
        indexes = by_file.get(f.path)
        if not indexes:
            report.missing_files.append(f.path)
            continue
        if len(indexes) != len(set(indexes)):
            report.duplicated_chunks.append(f.path)
        if len(indexes) != expected.get(f.path):
            report.wrong_chunk_counts.append(f.path)


def _check_events(app: Any, report: CrashReport) -> dict[str, int]:
    """Each file ingested once; returns the chunk count each file's FileChunked recorded."""
    ingests: Counter[str] = Counter()
    chunks: dict[str, int] = {}
    position = 0
    while batch := app.read(position, 500):
        ingests.update(e.payload["file_urn"] for e in batch if e.event_type == "FileIngested")
        for e in batch:
            if e.event_type == "FileChunked":
                chunks[e.payload["path"]] = len(e.payload["chunks"])
        position = batch[-1].position
    report.extra_ingests = sorted(urn for urn, n in ingests.items() if n != 1)
    return chunks


def _same(live: list[Any], rebuilt: list[Any]) -> tuple[bool, str]:
    if [p.id for p in live] != [p.id for p in rebuilt]:
        return False, f"point ids differ ({len(live)} live, {len(rebuilt)} rebuilt)"
    for a, b in zip(live, rebuilt, strict=True):
        if a.payload != b.payload:
            return False, f"payload of {a.id} differs"
        if max(abs(x - y) for x, y in zip(a.vector, b.vector, strict=True)) > 1e-4:
            return False, f"vector of {a.id} differs"
    return True, ""
