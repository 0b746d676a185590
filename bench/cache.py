"""`upstream bench cache`: a repeated question answered from the exact cache, a paraphrase from
the semantic cache, a negated question not at all.

It serves the embedded profile on a free port (uvicorn in this process, the default embedding
model, Redis at `--redis-url` under a key prefix of its own, or the in-process cache), ingests
`examples/shop`, and asks over real HTTP:

- `POST /api/chat/semantic` when the service has it: the first request computes the answer,
  the next `requests` identical ones are timed client-side (median, p95) and must carry
  `metadata.cache == "exact"`; then a paraphrase and a negation of the question.
- otherwise the `AnswerCache` lookup path itself (the code the chat endpoints call): an answer is
  stored under the question's key and looked up `requests` times, then the paraphrase and the
  negation are looked up with their real embeddings.
"""

from __future__ import annotations

import asyncio
import platform
import socket
import statistics
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import httpx

from commands.sources.local import LocalFile, walk

# (question, a paraphrase scoring >= 0.95 with all-MiniLM-L6-v2, its negation); the first whose
# answer is cacheable (a CITE: a routed, low-confidence answer is never cached) is measured.
QUESTIONS = (
    (
        "Which models read stg_orders?",
        "Which models read from stg_orders?",  # 0.99
        "Which models do not read stg_orders?",  # 0.97
    ),
    (
        "Where is net_revenue computed?",
        "Where is net_revenue calculated?",  # 0.98
        "Where is net_revenue not computed?",
    ),
    (
        "What feeds customer_summary?",
        "What feeds into customer_summary?",  # 0.96
        "What does not feed customer_summary?",
    ),
)
QUESTION, PARAPHRASE, NEGATION = QUESTIONS[0]
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "shop"
CHAT_ROUTE = "/api/chat/semantic"


@dataclass
class CacheBench:
    path: str
    backend: str
    requests: int
    first_ms: float
    median_ms: float
    p95_ms: float
    min_ms: float
    all_exact: bool
    paraphrase: dict[str, Any] = field(default_factory=dict)
    negation: dict[str, Any] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)


class _Server:
    """uvicorn serving the app on 127.0.0.1 in a thread of this process."""

    def __init__(self, app: Any, port: int) -> None:
        import uvicorn

        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        deadline = time.monotonic() + 600
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the service did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.should_exit = True
        self.thread.join(60)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_cache_bench(requests: int = 200, redis_url: str | None = None) -> CacheBench:
    from adapters.bootstrap import bootstrap
    from adapters.settings import Settings
    from api.app import create_app

    prefix = f"upstream-bench-{uuid.uuid4().hex[:12]}:"
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            UPSTREAM_DATA_DIR=Path(tmp) / "data",
            REDIS_URL=redis_url or "",
            CACHE_KEY_PREFIX=prefix,
            UPSTREAM_SEED_PROFILE="local",
        )
        container = bootstrap(settings, "serve")
        app = create_app(container=container)
        port = free_port()
        try:
            with _Server(app, port), httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
                _ingest_example(http)
                has_chat = CHAT_ROUTE in app.openapi()["paths"]
                result = (
                    _bench_http(http, requests)
                    if has_chat
                    else asyncio.run(_bench_lookup(container, requests))
                )
                result.status = http.get("/api/v1/rag/status").json()
        finally:
            container.caches.store.delete_matching("*")
    return result


def _ingest_example(http: httpx.Client) -> None:
    files = [
        {"path": f.path, "content": f.content}
        for f in walk(EXAMPLE, 1_000_000)
        if isinstance(f, LocalFile)
    ]
    reply = http.post(
        "/api/v1/ingest?wait=true", json={"project_id": "shop", "files": files}, timeout=600
    )
    reply.raise_for_status()


def _ask(http: httpx.Client, question: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    reply = http.post(CHAT_ROUTE, json={"query": question, "project_id": "shop"}, timeout=600)
    elapsed = (time.perf_counter() - started) * 1000
    reply.raise_for_status()
    return elapsed, reply.json()


def _bench_http(http: httpx.Client, requests: int) -> CacheBench:
    for triple in QUESTIONS:
        first_ms, first = _ask(http, triple[0])
        if first["metadata"].get("action") == "CITE":
            break
    question, paraphrase_question, negation_question = triple
    timings, kinds = [], []
    for _ in range(requests):
        elapsed, body = _ask(http, question)
        timings.append(elapsed)
        kinds.append(body["metadata"].get("cache"))
    paraphrase_ms, paraphrase = _ask(http, paraphrase_question)
    negation_ms, negation = _ask(http, negation_question)
    return CacheBench(
        path=f"HTTP POST {CHAT_ROUTE} {question!r} (action of the first answer: "
        f"{first['metadata'].get('action')})",
        backend=str(http.get("/api/v1/rag/status").json()["backend"]["backend"]),
        requests=requests,
        first_ms=round(first_ms, 2),
        **_spread(timings),
        all_exact=all(k == "exact" for k in kinds),
        paraphrase=_outcome(paraphrase_question, paraphrase_ms, paraphrase["metadata"]),
        negation=_outcome(negation_question, negation_ms, negation["metadata"]),
    )


async def _bench_lookup(container: Any, requests: int) -> CacheBench:
    from queries.answer_cache import AnswerKey

    def key(question: str) -> AnswerKey:
        return AnswerKey("semantic", question, "shop", "default", (), "hybrid", "bench")

    cache = container.answer_cache
    [vector, paraphrase_vector, negation_vector] = container.embedder.embed(
        [QUESTION, PARAPHRASE, NEGATION]
    )
    started = time.perf_counter()
    body = {"answer": "fct_orders reads stg_orders", "metadata": {"cache": None}}
    urns = ["urn:li:dataset:shop:stg_orders"]
    await cache.store(key(QUESTION), vector, body, urns, computed_at=time.time())
    first_ms = (time.perf_counter() - started) * 1000
    timings, kinds = [], []
    for _ in range(requests):
        started = time.perf_counter()
        hit = await cache.lookup(key(QUESTION), vector)
        timings.append((time.perf_counter() - started) * 1000)
        kinds.append(hit.kind if hit else None)
    outcomes = []
    for question, question_vector in ((PARAPHRASE, paraphrase_vector), (NEGATION, negation_vector)):
        started = time.perf_counter()
        hit = await cache.lookup(key(question), question_vector)
        elapsed = (time.perf_counter() - started) * 1000
        metadata = {"cache": hit.kind, "cache_score": hit.score} if hit else {"cache": None}
        similarity = sum(a * b for a, b in zip(vector, question_vector, strict=True))
        outcomes.append({**_outcome(question, elapsed, metadata), "cosine": round(similarity, 4)})
    return CacheBench(
        path="AnswerCache.lookup (POST /api/chat/semantic is not served yet)",
        backend=cache.kv.backend,
        requests=requests,
        first_ms=round(first_ms, 2),
        **_spread(timings),
        all_exact=all(k == "exact" for k in kinds),
        paraphrase=outcomes[0],
        negation=outcomes[1],
    )


def _spread(timings: list[float]) -> dict[str, Any]:
    ordered = sorted(timings)
    return {
        "median_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
        "min_ms": round(ordered[0], 3),
    }


def _outcome(question: str, elapsed_ms: float, metadata: dict[str, Any]) -> dict[str, Any]:
    return {
        "question": question,
        "cache": metadata.get("cache"),
        "score": metadata.get("cache_score"),
        "ms": round(elapsed_ms, 2),
    }


def write_report(result: CacheBench, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"cache_{date.today().isoformat()}.md"
    figures = asdict(result)
    status = figures.pop("status")
    rows = "\n".join(f"| {k} | {v} |" for k, v in figures.items())
    verdict = "met" if result.all_exact and result.median_ms < 5 else "NOT met"
    path.write_text(
        f"# Cache benchmark ({date.today().isoformat()})\n\n"
        f"Machine: {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}; embedded profile serving on 127.0.0.1 (uvicorn), "
        f"`examples/shop` ingested, cache backend `{result.backend}`.\n\n"
        f"The first question of {[q for q, _, _ in QUESTIONS]} whose answer is cacheable (a "
        f"CITE) is asked once, then {result.requests} times more; latency is "
        "measured by the client around each request. Then a paraphrase (must come from the "
        "semantic cache, similarity >= 0.95) and a negation (must not: the polarity guard).\n\n"
        f"Target: median < 5 ms from the exact cache: **{verdict}**.\n\n"
        f"| measure | value |\n|---|---|\n{rows}\n\n"
        f"Cache figures after the run (`GET /api/v1/rag/status`): exact "
        f"{status.get('exact')}, semantic {status.get('semantic')}.\n\n"
        "Reproduce: `upstream bench cache --redis-url redis://127.0.0.1:6379/0`.\n"
    )
    return path
