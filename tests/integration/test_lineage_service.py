"""Lineage through the whole service: a 50+ model dbt project, exact up to 3 hops."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import pytest

from tests.corpus_service import ingested_service

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "dbt_shop"
EXPECTED = json.loads((CORPUS / "expected_edges.json").read_text())


def _relation(model: str) -> str:
    return model.lower()  # aliases are properties, not identities


def _dependencies() -> dict[str, set[str]]:
    """dataset -> the datasets it reads from, as curated by hand in expected_edges.json."""
    deps: dict[str, set[str]] = {}
    for model, facts in EXPECTED["models"].items():
        reads = {_relation(r) for r in facts["refs"]} | {s.lower() for s in facts["sources"]}
        deps[_relation(model)] = reads
    return deps


def _reachable(start: str, graph: dict[str, set[str]], hops: int) -> set[str]:
    seen, queue = {start}, deque([(start, 0)])
    while queue:
        node, depth = queue.popleft()
        if depth == hops:
            continue
        for nxt in graph.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, depth + 1))
    return seen - {start}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    data = tmp_path_factory.mktemp("lineage")
    with ingested_service(data, CORPUS, "shop") as client:
        yield client


def _walk(service, name: str, direction: str, hops: int) -> dict:
    reply = service.get(
        f"/api/v1/lineage/{name}/{direction}", params={"hops": hops, "project_id": "shop"}
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


def _dataset_names(answer: dict) -> set[str]:
    kinds = {"table", "view", "dbt_model", "dbt_source", "dbt_seed"}
    return {n["name"].lower() for n in answer["nodes"] if n["kind"] in kinds}


def test_the_corpus_has_fifty_models_or_more():
    assert len(EXPECTED["models"]) >= 50


def test_every_ref_and_source_is_an_edge_with_evidence(service):
    deps = _dependencies()
    for model, reads in deps.items():
        answer = _walk(service, model, "upstream", 1)
        assert _dataset_names(answer) == reads, model
        for edge in answer["edges"]:
            assert edge["evidence"]["file"].endswith(".sql") and edge["provenance"] == "parser"


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_upstream_is_exact_up_to_three_hops(service, hops):
    deps = _dependencies()
    for model in deps:
        assert _dataset_names(_walk(service, model, "upstream", hops)) == _reachable(
            model, deps, hops
        ), (model, hops)


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_downstream_is_exact_up_to_three_hops(service, hops):
    deps = _dependencies()
    reverse: dict[str, set[str]] = {}
    for target, sources in deps.items():
        for source in sources:
            reverse.setdefault(source, set()).add(target)
    starts = sorted(set(reverse))
    for start in starts:
        got = _dataset_names(_walk(service, start, "downstream", hops))
        assert got == _reachable(start, reverse, hops), (start, hops)


def test_unknown_and_ambiguous_names_are_clear_errors(service):
    missing = service.get("/api/v1/lineage/no_such_model/upstream")
    assert missing.status_code == 404 and missing.json()["error"] == "entity_not_found"
    bad_hops = service.get("/api/v1/lineage/fct_orders/upstream", params={"hops": 9})
    assert bad_hops.status_code == 422


def test_replay_rebuilds_the_same_graph(service):
    container = service.container
    live = container.graph.dump()
    reply = service.post("/api/v1/replay", json={"projection": "graph"})
    assert reply.status_code == 200
    assert container.graph.dump() == live
