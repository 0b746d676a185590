"""The graph projection on the in-memory graph store: diffs, retractions, deletions, replay."""

from __future__ import annotations

import pytest

from adapters.graph_memory import InMemoryGraphStore
from commands.models import DeleteFile, IngestFile
from projections.graph import GraphProjection
from projections.rebuild import catch_up, rebuild
from queries.lineage import EntityNotFound, LineageService

pytestmark = pytest.mark.unit


@pytest.fixture
def graph():
    store = InMemoryGraphStore()
    projection = GraphProjection(store)
    projection.start()
    return projection


def _ingest(app, path, content):
    return app.ingest_file(IngestFile(project_id="p", path=path, content=content))


def _upstream(store, name, hops=3):
    answer = LineageService(store).walk("default", "p", name, "upstream", hops)
    return sorted(n.name for n in answer.subgraph.nodes if n.kind != "file")


def test_views_chain_into_multi_hop_lineage(memory_app, graph):
    _ingest(memory_app, "a.sql", "create view b as select x from a")
    _ingest(memory_app, "c.sql", "create view c as select x from b")
    catch_up(graph, memory_app)
    assert _upstream(graph.store, "c") == ["a", "b"]
    assert _upstream(graph.store, "c", hops=1) == ["b"]


def test_an_edit_retracts_the_edges_that_disappeared(memory_app, graph):
    _ingest(memory_app, "v.sql", "create view v as select x from old_source")
    catch_up(graph, memory_app)
    _ingest(memory_app, "v.sql", "create view v as select x from new_source")
    catch_up(graph, memory_app)
    assert _upstream(graph.store, "v") == ["new_source"]
    types = [e.event_type for e in memory_app.read(0, 100)]
    assert "LineageEdgesRetracted" in types


def test_an_unchanged_reingest_records_no_lineage(memory_app, graph):
    _ingest(memory_app, "v.sql", "create view v as select x from s")
    head = memory_app.max_position()
    _ingest(memory_app, "v.sql", "create view v as select x from s")
    assert memory_app.max_position() == head


def test_a_comment_edit_records_nothing_for_lineage_but_moved_lines(memory_app):
    _ingest(memory_app, "v.sql", "create view v as select x from s")
    before = memory_app.max_position()
    _ingest(memory_app, "v.sql", "create view v as select x from s -- same lineage")
    kinds = [e.event_type for e in memory_app.read(before, 10)]
    assert kinds == ["FileIngested", "FileChunked"]  # same edges, same lines: no lineage event


def test_a_deleted_file_leaves_the_graph(memory_app, graph):
    _ingest(memory_app, "v.sql", "create view v as select x from s")
    catch_up(graph, memory_app)
    memory_app.delete_file(DeleteFile(project_id="p", path="v.sql"))
    catch_up(graph, memory_app)
    with pytest.raises(EntityNotFound):
        LineageService(graph.store).walk("default", "p", "v", "upstream", 1)


def test_replay_rebuilds_the_same_graph(memory_app, graph):
    for i in range(10):
        _ingest(memory_app, f"m{i}.sql", f"insert into t{i + 1} select a, b from t{i}")
    _ingest(memory_app, "m3.sql", "insert into t4 select a from t0")
    memory_app.delete_file(DeleteFile(project_id="p", path="m5.sql"))
    catch_up(graph, memory_app, batch=3)
    live = graph.store.dump()

    rebuild(graph, memory_app, batch=100)

    assert graph.store.dump() == live
