"""The hand-written dbt project in tests/corpus/dbt_shop against its curated dependencies.

expected_edges.json was written by reading the models, not by running the extractor: every
ref() and source() of every model must be a READS_FROM edge from the model, and nothing else
may appear at the dataset level.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from domain.dbt import DbtProject, find_dbt_projects
from domain.file_lineage import extract_file_lineage
from domain.graph import DATASET_KINDS, FileLineage, NodeKind, Rel

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "dbt_shop"


@cache
def expected() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / "expected_edges.json").read_text())
    return data


@cache
def paths() -> tuple[str, ...]:
    return tuple(sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.is_file()))


@cache
def project() -> DbtProject:
    projects = find_dbt_projects(paths(), lambda path: (CORPUS / path).read_text())
    assert len(projects) == 1
    return projects[0]


@cache
def lineages() -> dict[str, FileLineage]:
    return {
        path: extract_file_lineage(
            path,
            (CORPUS / path).read_text(),
            "shop",
            dialect=expected()["dialect"],
            dbt=project(),
        )
        for path in paths()
    }


def relation(model: str) -> str:
    return model  # a model is its name; an alias is a property (see DbtProject.relation_name)


def dataset_reads(lineage: FileLineage) -> dict[str, dict[str, Any]]:
    """READS_FROM edges whose both ends are datasets: target name -> edge facts."""
    nodes = {node.urn: node for node in lineage.nodes}
    found: dict[str, dict[str, Any]] = {}
    for edge in lineage.edges:
        if edge.rel != Rel.READS_FROM:
            continue
        source, target = nodes[edge.source], nodes[edge.target]
        if source.kind in DATASET_KINDS and target.kind in DATASET_KINDS:
            found[target.name] = {"from": source.name, "edge": edge, "kind": target.kind}
    return found


def test_corpus_is_a_real_sized_project() -> None:
    models = expected()["models"]
    dbt = project()
    assert dbt.name == "dbt_shop"
    assert len([m for m, d in models.items() if d["path"].startswith("models/")]) >= 50
    sources = {s for d in models.values() for s in d["sources"]}
    assert 6 <= len({s.split(".")[0] for s in sources}) <= 10
    assert set(dbt.models) == set(models)  # the snapshot is in the map too
    assert dict(dbt.aliases) == expected()["aliases"]
    assert sorted(dbt.seeds) == expected()["seeds"]


@pytest.mark.parametrize(
    "model", sorted(json.loads((CORPUS / "expected_edges.json").read_text())["models"])
)
def test_every_ref_and_source_is_a_reads_from_edge_and_nothing_else(model: str) -> None:
    facts = expected()["models"][model]
    lineage = lineages()[facts["path"]]
    reads = dataset_reads(lineage)
    wanted = {relation(ref) for ref in facts["refs"]} | set(facts["sources"])
    assert set(reads) == wanted
    assert {read["from"] for read in reads.values()} == {relation(model)}
    for source in facts["sources"]:
        assert reads[source]["kind"] == NodeKind.DBT_SOURCE
    for ref in facts["refs"]:
        kind = NodeKind.DBT_SEED if ref in expected()["seeds"] else NodeKind.DBT_MODEL
        assert reads[relation(ref)]["kind"] == kind
    conditional = {name for name, read in reads.items() if read["edge"].conditional}
    assert conditional == {relation(ref) for ref in facts["conditional"]}
    hints = {name for name, read in reads.items() if read["edge"].properties.get("depends_on_hint")}
    assert hints == {relation(ref) for ref in facts["depends_on_hints"]}


@pytest.mark.parametrize(
    "path", sorted(json.loads((CORPUS / "expected_edges.json").read_text())["other_files"])
)
def test_analyses_and_tests_read_their_refs_as_files(path: str) -> None:
    facts = expected()["other_files"][path]
    lineage = lineages()[path]
    nodes = {node.urn: node for node in lineage.nodes}
    reads = {nodes[e.target].name for e in lineage.edges if e.rel == Rel.READS_FROM}
    assert reads == {relation(ref) for ref in facts["refs"]} | set(facts["sources"])
    assert all(nodes[e.source].kind == NodeKind.FILE for e in lineage.edges)


def test_whole_corpus_is_parsed_without_warnings_and_with_column_lineage() -> None:
    warnings = [w for lineage in lineages().values() for w in lineage.warnings]
    assert warnings == []
    for model, facts in expected()["models"].items():
        derives = [e for e in lineages()[facts["path"]].edges if e.rel == Rel.DERIVES]
        assert derives, f"no column lineage for {model}"


def test_model_nodes_agree_across_files() -> None:
    """A model referenced elsewhere is the same node (urn and path) as the one its file defines."""
    defined: dict[str, str | None] = {}
    referenced: dict[str, set[str | None]] = {}
    for path, lineage in lineages().items():
        nodes = {node.urn: node for node in lineage.nodes}
        for edge in lineage.edges:
            if edge.rel == Rel.DEFINED_IN and nodes[edge.source].kind == NodeKind.DBT_MODEL:
                defined[edge.source] = path
        for node in lineage.nodes:
            if node.kind == NodeKind.DBT_MODEL:
                referenced.setdefault(node.urn, set()).add(node.path)
    assert set(referenced) == set(defined)
    for urn, seen in referenced.items():
        assert seen == {defined[urn]}, urn


def test_properties_yaml_documents_every_model_and_source() -> None:
    documented: set[str] = set()
    source_nodes: set[str] = set()
    for path, lineage in lineages().items():
        if not path.endswith(".yml"):
            continue
        for node in lineage.nodes:
            if node.kind == NodeKind.DBT_MODEL and node.properties.get("description"):
                documented.add(node.name)
            if node.kind == NodeKind.DBT_SOURCE:
                source_nodes.add(node.name)
    models = expected()["models"]
    wanted = {relation(m) for m, d in models.items() if d["path"].startswith("models/")}
    assert documented == wanted
    assert source_nodes == {s for d in models.values() for s in d["sources"]}


def test_incremental_models_keep_their_config() -> None:
    incremental = set()
    for lineage in lineages().values():
        for node in lineage.nodes:
            if (
                node.kind == NodeKind.DBT_MODEL
                and node.properties.get("materialized") == "incremental"
            ):
                incremental.add(node.name)
    assert {"fct_orders", "fct_sessions", "stg_web__events"} <= incremental
