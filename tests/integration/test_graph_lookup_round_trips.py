"""Entity lookup by many names is one query, whatever the number of names."""

from __future__ import annotations

import pytest

from adapters.graph_ladybug import LadybugGraphStore
from domain.graph import LineageNode, NodeKind

pytestmark = pytest.mark.integration


@pytest.mark.spec("LLM-31.1")
def test_many_names_are_looked_up_in_one_round_trip(tmp_path, monkeypatch):
    store = LadybugGraphStore(tmp_path / "graph")
    store.ensure()
    nodes = [LineageNode.create(NodeKind.TABLE, "p", f"schema.table_{i}") for i in range(30)]
    store.apply_file("t", "p", "a.sql", nodes, [], [])
    calls: list[str] = []
    original = store._query

    def counting(query, params):
        calls.append(query)
        return original(query, params)

    monkeypatch.setattr(store, "_query", counting)
    one = store.find_nodes("t", "p", ["TABLE_1"])
    first = len(calls)
    many = store.find_nodes("t", "p", [f"Table_{i}" for i in range(30)])

    assert len(calls) - first == first == 1
    assert [n.name for n in one["TABLE_1"]] == ["schema.table_1"]
    assert all(len(found) == 1 for found in many.values())
    store.close()
