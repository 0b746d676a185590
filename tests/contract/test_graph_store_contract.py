"""One contract for the GraphStore port, run against every adapter.

Neo4j joins when NEO4J_URI (NEO4J_USER, NEO4J_PASSWORD, optionally NEO4J_DATABASE) names a
server whose database may be wiped: each test drops the whole graph before and after.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict
from collections.abc import Iterator

import pytest

from adapters.graph_ladybug import LadybugGraphStore
from adapters.graph_memory import InMemoryGraphStore
from domain.graph import LineageEdge, LineageNode, NodeKind, Rel
from domain.graph_port import GraphStore, edge_visible, from_paths

P = "shop"
T = "acme"


def _ladybug(tmp_path) -> LadybugGraphStore:
    return LadybugGraphStore(tmp_path / "graph" / "lineage.lbug")


def _neo4j(_tmp_path) -> GraphStore:
    from adapters.graph_neo4j import Neo4jGraphStore  # the driver is needed only here

    return Neo4jGraphStore(
        os.environ["NEO4J_URI"],
        os.environ.get("NEO4J_USER", "neo4j"),
        os.environ.get("NEO4J_PASSWORD", ""),
        os.environ.get("NEO4J_DATABASE") or None,
    )


ADAPTERS = [
    pytest.param(lambda _: InMemoryGraphStore(), id="memory", marks=pytest.mark.unit),
    pytest.param(_ladybug, id="ladybug", marks=pytest.mark.integration),
]
if os.environ.get("NEO4J_URI"):  # no Neo4j server on every machine
    ADAPTERS.append(pytest.param(_neo4j, id="neo4j", marks=pytest.mark.integration))


@pytest.fixture(params=ADAPTERS)
def store(request, tmp_path) -> Iterator[GraphStore]:
    store = request.param(tmp_path)
    assert isinstance(store, GraphStore)
    store.ensure()
    store.drop()
    yield store
    store.drop()
    store.close()


# --- a small dbt-like repository ----------------------------------------------------------


def ds(name: str, kind: NodeKind = NodeKind.TABLE, path: str | None = None, **props):
    return LineageNode.create(kind, P, name, path, **props)


def col(table: str, column: str, path: str | None = None) -> LineageNode:
    return LineageNode.create(NodeKind.COLUMN, P, f"{table}.{column}", path)


def file_node(path: str) -> LineageNode:
    return LineageNode.create(NodeKind.FILE, P, path, path)


def edge(source: LineageNode, target: LineageNode, file_path: str, **kw) -> LineageEdge:
    rel = kw.pop("rel", Rel.READS_FROM)
    line = kw.pop("line", 1)
    return LineageEdge(source.urn, target.urn, rel, P, file_path, line, line + 2, **kw)


RAW_ORDERS = ds("raw.orders", NodeKind.DBT_SOURCE, "models/sources.yml")
RAW_CUSTOMERS = ds("raw.customers", NodeKind.DBT_SOURCE, "models/sources.yml")
STG_ORDERS = ds("staging.stg_orders", NodeKind.DBT_MODEL, "models/stg_orders.sql")
SUMMARY = ds("marts.customer_summary", NodeKind.DBT_MODEL, "models/customer_summary.sql")
REPORT = ds("reporting.Daily_Report", NodeKind.VIEW, "sql/report.sql", owner="bi")


def ref(node: LineageNode) -> LineageNode:
    """How another file sees a dataset: a plain table, no path."""
    return ds(node.name)


def repo_files() -> list[tuple[str, list[LineageNode], list[LineageEdge]]]:
    sources = "models/sources.yml"
    stg = "models/stg_orders.sql"
    summary = "models/customer_summary.sql"
    report = "sql/report.sql"
    return [
        (
            sources,
            [RAW_ORDERS, RAW_CUSTOMERS, file_node(sources)],
            [
                edge(RAW_ORDERS, file_node(sources), sources, rel=Rel.DEFINED_IN),
                edge(RAW_CUSTOMERS, file_node(sources), sources, rel=Rel.DEFINED_IN, line=5),
            ],
        ),
        (
            stg,
            [STG_ORDERS, ref(RAW_ORDERS), file_node(stg)],
            [
                edge(STG_ORDERS, RAW_ORDERS, stg, dialect="snowflake"),
                edge(STG_ORDERS, file_node(stg), stg, rel=Rel.DEFINED_IN),
            ],
        ),
        (
            summary,
            [SUMMARY, ref(STG_ORDERS), ref(RAW_CUSTOMERS), col(SUMMARY.name, "total", summary)],
            [
                edge(SUMMARY, STG_ORDERS, summary, line=3),
                edge(SUMMARY, RAW_CUSTOMERS, summary, line=7, conditional=True),
                edge(
                    col(SUMMARY.name, "total"),
                    col(STG_ORDERS.name, "amount"),
                    summary,
                    rel=Rel.DERIVES,
                ),
            ],
        ),
        (
            report,
            [REPORT, ref(SUMMARY)],
            [
                edge(REPORT, SUMMARY, report, dialect="postgres"),
                edge(REPORT, RAW_ORDERS, report, provenance="llm", confidence=0.6, line=9),
            ],
        ),
    ]


def apply_all(store: GraphStore, files=None, tenant: str = T) -> None:
    for path, nodes, edges in files if files is not None else repo_files():
        store.apply_file(tenant, P, path, nodes, edges, [])


# --- upserts --------------------------------------------------------------------------------


def test_applying_the_same_file_twice_changes_nothing(store):
    apply_all(store)
    counts, dumped = store.counts(), store.dump()
    apply_all(store)
    assert store.counts() == counts
    assert store.dump() == dumped
    assert counts["edges"] == 9


def test_a_kind_only_becomes_more_specific(store):
    for kind in (NodeKind.VIEW, NodeKind.DBT_MODEL, NodeKind.DBT_SOURCE, NodeKind.DBT_SEED):
        node = ds(f"s.{kind}", kind, f"models/{kind}.sql")
        store.apply_file(T, P, node.path, [node], [], [])
        store.apply_file(T, P, "other.sql", [ref(node)], [], [])
        stored = store.get_node(T, node.urn)
        assert (stored.kind, stored.path) == (kind, node.path)
    upgraded = ds("s.plain")
    store.apply_file(T, P, "a.sql", [upgraded], [], [])
    store.apply_file(T, P, "b.sql", [ds("s.plain", NodeKind.VIEW, "b.sql")], [], [])
    assert store.get_node(T, upgraded.urn).kind == NodeKind.VIEW


def test_path_and_properties_are_kept_when_not_given(store):
    store.apply_file(T, P, "sql/report.sql", [REPORT], [], [])
    store.apply_file(T, P, "x.sql", [ds(REPORT.name, NodeKind.VIEW)], [], [])
    assert store.get_node(T, REPORT.urn) == REPORT
    moved = ds(REPORT.name, NodeKind.VIEW, "sql/moved.sql", owner="ops")
    store.apply_file(T, P, "sql/moved.sql", [moved], [], [])
    assert store.get_node(T, REPORT.urn) == moved


def test_edges_are_replaced_and_retracted(store):
    apply_all(store)
    path, nodes, edges = repo_files()[2]
    changed = _with(edges[0], line_start=40, line_end=44, confidence=0.9, dialect="duckdb")
    store.apply_file(T, P, path, nodes, [changed], [edges[1].edge_id, edges[2].edge_id])
    assert store.edges_of_file(T, P, path) == [changed]
    assert store.counts()["edges"] == 7


def _with(e: LineageEdge, **changes) -> LineageEdge:
    data = e.to_dict()
    data.update(changes)
    return LineageEdge.from_dict(data)


def test_a_retracted_edge_given_again_is_kept(store):
    path, nodes, edges = repo_files()[1]
    store.apply_file(T, P, path, nodes, edges, [])
    store.apply_file(T, P, path, nodes, edges, [edges[0].edge_id])
    assert store.edges_of_file(T, P, path) == sorted(edges, key=_edge_order)


def test_an_unknown_endpoint_becomes_a_placeholder_node(store):
    other = ds("ext.partner_feed")
    store.apply_file(T, P, "a.sql", [STG_ORDERS], [edge(STG_ORDERS, other, "a.sql")], [])
    placeholder = store.get_node(T, other.urn)
    assert (placeholder.kind, placeholder.name, placeholder.path) == (
        NodeKind.TABLE,
        "ext.partner_feed",
        None,
    )
    store.apply_file(T, P, "b.sql", [ds(other.name, NodeKind.VIEW, "b.sql")], [], [])
    store.apply_file(T, P, "a.sql", [STG_ORDERS], [edge(STG_ORDERS, other, "a.sql")], [])
    assert store.get_node(T, other.urn).kind == NodeKind.VIEW


def test_evidence_fields_round_trip(store):
    via = "urn:li:function:shop:etl/load.py#Loader.run"
    full = LineageEdge(
        source=REPORT.urn,
        target=SUMMARY.urn,
        rel=Rel.READS_FROM,
        project_id=P,
        file_path="etl/load.py",
        line_start=12,
        line_end=30,
        provenance="llm",
        dialect="bigquery",
        confidence=0.75,
        conditional=True,
        via=via,
        properties={"status": "accepted", "reason": "f-string SQL", "spans": [[1, 2], [3, 4]]},
    )
    store.apply_file(T, P, "etl/load.py", [REPORT, SUMMARY], [full], [])
    assert store.edges_of_file(T, P, "etl/load.py") == [full]
    assert store.traverse(T, REPORT.urn, "upstream", 1).edges == (full,)
    assert store.dump()[1] == [full]


# --- remove_file ----------------------------------------------------------------------------


def test_remove_file_deletes_its_edges_and_the_nodes_left_alone(store):
    apply_all(store)
    store.remove_file(T, P, "sql/report.sql")
    assert store.edges_of_file(T, P, "sql/report.sql") == []
    assert store.get_node(T, REPORT.urn) is None
    # the summary is referenced by the report but defined elsewhere, and still has edges
    assert store.get_node(T, SUMMARY.urn) == SUMMARY
    store.remove_file(T, P, "models/customer_summary.sql")
    assert store.get_node(T, SUMMARY.urn) is None
    assert store.get_node(T, col(SUMMARY.name, "total").urn) is None
    # defined in another file, which still holds its edges
    assert store.get_node(T, STG_ORDERS.urn) == STG_ORDERS
    assert store.counts()["edges"] == 4


def test_remove_file_deletes_the_file_node(store):
    apply_all(store)
    stg = "models/stg_orders.sql"
    store.remove_file(T, P, stg)
    assert store.get_node(T, file_node(stg).urn) is None
    assert store.get_node(T, STG_ORDERS.urn) is not None  # the summary still reads it
    assert store.traverse(T, STG_ORDERS.urn, "upstream", 1).nodes == ()


def test_remove_file_is_scoped_to_the_project(store):
    apply_all(store)
    store.remove_file(T, "another_project", "models/stg_orders.sql")
    assert len(store.edges_of_file(T, P, "models/stg_orders.sql")) == 2


# --- lookups --------------------------------------------------------------------------------


@pytest.mark.spec("LLM-31.2")
def test_find_nodes_matches_many_names_ignoring_case(store):
    apply_all(store)
    names = ["customer_summary", "RAW.ORDERS", "daily_report", REPORT.urn, "nothing", "TOTAL"]
    found = store.find_nodes(T, P, names)
    assert list(found) == names
    assert [n.urn for n in found["customer_summary"]] == [SUMMARY.urn]
    assert [n.urn for n in found["RAW.ORDERS"]] == [RAW_ORDERS.urn]
    assert found["daily_report"] == [REPORT]
    assert found[REPORT.urn] == [REPORT]
    assert found["nothing"] == []
    assert [n.urn for n in found["TOTAL"]] == [col(SUMMARY.name, "total").urn]


def test_find_nodes_returns_every_match_sorted_by_urn(store):
    apply_all(store)
    store.apply_file(T, P, "x.sql", [ds("archive.orders"), ds("orders")], [], [])
    found = store.find_nodes(T, None, ["Orders"])["Orders"]
    expected = sorted([RAW_ORDERS.urn, ds("archive.orders").urn, ds("orders").urn])
    assert [n.urn for n in found] == expected


def test_find_nodes_filters_by_project(store):
    apply_all(store)
    other = LineageNode.create(NodeKind.TABLE, "crm", "raw.orders")
    store.apply_file(T, "crm", "crm.sql", [other], [], [])
    assert {n.urn for n in store.find_nodes(T, None, ["orders"])["orders"]} == {
        RAW_ORDERS.urn,
        other.urn,
    }
    assert [n.urn for n in store.find_nodes(T, "crm", ["orders"])["orders"]] == [other.urn]


def test_find_nodes_uses_short_names_of_files_ctes_and_functions(store):
    nodes = [
        file_node("models/orders.sql"),
        LineageNode.create(NodeKind.CTE, P, "models/orders.sql#recent"),
        LineageNode.create(NodeKind.PYTHON_FUNCTION, P, "etl/load.py#Loader.run"),
    ]
    store.apply_file(T, P, "models/orders.sql", nodes, [], [])
    found = store.find_nodes(T, P, ["orders.sql", "RECENT", "run", "sql"])
    assert [n.urn for n in found["orders.sql"]] == [nodes[0].urn]
    assert [n.urn for n in found["RECENT"]] == [nodes[1].urn]
    assert [n.urn for n in found["run"]] == [nodes[2].urn]
    assert found["sql"] == []


def test_get_node_returns_the_stored_node_or_none(store):
    apply_all(store)
    assert store.get_node(T, RAW_ORDERS.urn) == RAW_ORDERS
    assert store.get_node(T, "urn:li:dataset:shop:nope") is None


# --- traversal ------------------------------------------------------------------------------
# X -> Y means X READS_FROM Y. A chain t0..t6, a diamond t0 -> d1 -> t2 and a cycle t3 -> t1.

NAMES = ("t0", "t1", "t2", "t3", "t4", "t5", "t6", "d1")
CHAIN = {name: ds(f"s.{name}", path=f"{name}.sql") for name in NAMES}
CHAIN_EDGES = [
    ("t0", "t1"),
    ("t1", "t2"),
    ("t2", "t3"),
    ("t3", "t4"),
    ("t4", "t5"),
    ("t5", "t6"),
    ("t0", "d1"),
    ("d1", "t2"),
    ("t3", "t1"),
]


def chain_files():
    files = []
    for source, target in CHAIN_EDGES:
        path = f"{source}.sql"
        e = edge(CHAIN[source], CHAIN[target], path, line=len(files) + 1)
        files.append((path, [CHAIN[source], ref(CHAIN[target])], [e]))
    return files


def u(name: str) -> str:
    return CHAIN[name].urn


def pairs(subgraph) -> set[tuple[str, str]]:
    short = {n.urn: k for k, n in CHAIN.items()}
    return {(short[e.source], short[e.target]) for e in subgraph.edges}


_EDGES_1 = {("t0", "t1"), ("t0", "d1")}
_EDGES_2 = _EDGES_1 | {("t1", "t2"), ("d1", "t2")}
_EDGES_3 = _EDGES_2 | {("t2", "t3")}
_EDGES_4 = _EDGES_3 | {("t3", "t4"), ("t3", "t1")}  # t3 -> t1: followed, t1 not revisited
_EDGES_5 = _EDGES_4 | {("t4", "t5")}
UPSTREAM_FROM_T0 = {  # hops: (nodes reached, edges followed)
    1: ({"t1", "d1"}, _EDGES_1),
    2: ({"t1", "d1", "t2"}, _EDGES_2),
    3: ({"t1", "d1", "t2", "t3"}, _EDGES_3),
    4: ({"t1", "d1", "t2", "t3", "t4"}, _EDGES_4),
    5: ({"t1", "d1", "t2", "t3", "t4", "t5"}, _EDGES_5),
}


@pytest.mark.parametrize("hops", [1, 2, 3, 4, 5])
def test_upstream_follows_outgoing_edges_hop_by_hop(store, hops):
    apply_all(store, chain_files())
    result = store.traverse(T, u("t0"), "upstream", hops)
    nodes, edges = UPSTREAM_FROM_T0[hops]
    assert result.start == u("t0")
    assert [n.urn for n in result.nodes] == sorted(u(n) for n in nodes)
    assert pairs(result) == edges
    assert len(result.edges) == len(edges)


def test_upstream_paths_are_shortest_first_and_deterministic(store):
    apply_all(store, chain_files())
    result = store.traverse(T, u("t0"), "upstream", 5)
    # t2 is two hops away both through t1 and d1: the smaller path (d1 < t1) is given
    assert result.paths == (
        (u("t0"), u("d1")),
        (u("t0"), u("t1")),
        (u("t0"), u("d1"), u("t2")),
        (u("t0"), u("d1"), u("t2"), u("t3")),
        (u("t0"), u("d1"), u("t2"), u("t3"), u("t4")),
        (u("t0"), u("d1"), u("t2"), u("t3"), u("t4"), u("t5")),
    )
    assert result.nodes == tuple(sorted(result.nodes, key=lambda n: n.urn))
    assert store.traverse(T, u("t0"), "upstream", 5) == result


def test_downstream_follows_incoming_edges_through_the_cycle(store):
    apply_all(store, chain_files())
    one = store.traverse(T, u("t2"), "downstream", 1)
    assert pairs(one) == {("t1", "t2"), ("d1", "t2")}
    two = store.traverse(T, u("t2"), "downstream", 2)
    assert {n.urn for n in two.nodes} == {u("t1"), u("d1"), u("t0"), u("t3")}
    assert pairs(two) == {("t1", "t2"), ("d1", "t2"), ("t0", "t1"), ("t3", "t1"), ("t0", "d1")}
    assert (u("t2"), u("d1"), u("t0")) in two.paths
    assert (u("t2"), u("t1"), u("t3")) in two.paths
    three = store.traverse(T, u("t2"), "downstream", 3)
    assert three.nodes == two.nodes  # the cycle leads back to the start: never revisited
    assert pairs(three) == pairs(two) | {("t2", "t3")}
    assert u("t2") not in {n.urn for n in three.nodes}


def test_traversal_from_a_leaf_or_an_unknown_node_is_empty(store):
    apply_all(store, chain_files())
    leaf = store.traverse(T, u("t6"), "upstream", 3)
    assert (leaf.start, leaf.nodes, leaf.edges, leaf.paths) == (u("t6"), (), (), ())
    assert store.traverse(T, "urn:li:dataset:shop:nope", "downstream", 2).nodes == ()


def test_hops_outside_one_to_five_are_refused(store):
    with pytest.raises(ValueError):
        store.traverse(T, u("t0"), "upstream", 0)
    with pytest.raises(ValueError):
        store.traverse(T, u("t0"), "upstream", 6)


def test_traversal_follows_only_the_given_relations(store):
    apply_all(store)
    total, amount = col(SUMMARY.name, "total"), col(STG_ORDERS.name, "amount")
    derived = store.traverse(T, total.urn, "upstream", 2)
    assert [n.urn for n in derived.nodes] == [amount.urn]
    assert store.traverse(T, total.urn, "upstream", 2, rels=(Rel.READS_FROM,)).nodes == ()
    tables = store.traverse(T, SUMMARY.urn, "upstream", 3, rels=(Rel.READS_FROM,))
    assert {n.urn for n in tables.nodes} == {STG_ORDERS.urn, RAW_ORDERS.urn, RAW_CUSTOMERS.urn}
    assert all(e.rel == Rel.READS_FROM for e in tables.edges)
    defined = store.traverse(T, STG_ORDERS.urn, "upstream", 1, rels=(Rel.DEFINED_IN,))
    assert [n.urn for n in defined.nodes] == [file_node("models/stg_orders.sql").urn]


def test_llm_edges_are_hidden_unless_asked_for_or_accepted(store):
    apply_all(store)
    default = store.traverse(T, REPORT.urn, "upstream", 1)
    assert [n.urn for n in default.nodes] == [SUMMARY.urn]
    with_llm = store.traverse(T, REPORT.urn, "upstream", 1, include_llm=True)
    assert {n.urn for n in with_llm.nodes} == {SUMMARY.urn, RAW_ORDERS.urn}
    llm_edge = next(e for e in with_llm.edges if e.target == RAW_ORDERS.urn)
    assert (llm_edge.provenance, llm_edge.confidence, llm_edge.line_start) == ("llm", 0.6, 9)
    downstream = store.traverse(T, RAW_ORDERS.urn, "downstream", 1)
    assert REPORT.urn not in {n.urn for n in downstream.nodes}
    accepted = _with(llm_edge, properties={"status": "accepted"})
    path, nodes, _edges = repo_files()[3]
    store.apply_file(T, P, path, nodes, [accepted], [])
    assert {n.urn for n in store.traverse(T, REPORT.urn, "upstream", 1).nodes} == {
        SUMMARY.urn,
        RAW_ORDERS.urn,
    }


def random_graph(seed: int) -> tuple[list[LineageNode], list[LineageEdge]]:
    rng = random.Random(seed)
    nodes = [ds(f"r.n{i}", path="random.sql") for i in range(25)]
    edges = [
        LineageEdge(
            rng.choice(nodes).urn,
            rng.choice(nodes).urn,  # self-loops and cycles included
            rng.choice([Rel.READS_FROM, Rel.DERIVES, Rel.WRITES_TO]),
            P,
            f"f{rng.randrange(4)}.sql",
            rng.randrange(50),
            60,
            provenance=rng.choice(["parser", "parser", "llm"]),
        )
        for _ in range(50)
    ]
    return nodes, edges


def trails(nodes, edges, start, direction, hops, include_llm):
    """Every walk of 1..hops distinct edges out of `start`: what Cypher's `*1..hops` matches."""
    by_urn = {n.urn: n for n in nodes}
    upstream = direction == "upstream"
    out = defaultdict(list)
    for e in edges:
        if e.rel in (Rel.READS_FROM, Rel.DERIVES) and edge_visible(e, include_llm):
            out[e.source if upstream else e.target].append(e)
    found = []

    def walk(walk_nodes, walk_edges):
        if walk_edges:
            found.append((walk_nodes, walk_edges))
        if len(walk_edges) < hops:
            for e in out[walk_nodes[-1].urn]:
                if e not in walk_edges:
                    other = by_urn[e.target if upstream else e.source]
                    walk([*walk_nodes, other], [*walk_edges, e])

    walk([by_urn[start]], [])
    return found


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_traversal_equals_the_answer_built_from_every_walk(store, seed):
    """Breadth-first (memory, Ladybug) and variable-length walks (Neo4j) agree."""
    nodes, edges = random_graph(seed)
    store.apply_file(T, P, "random.sql", nodes, edges, [])
    stored_nodes, stored_edges = store.dump()
    for start in random.Random(seed).sample([n.urn for n in nodes], 4):
        for direction in ("upstream", "downstream"):
            for hops in (1, 2, 4):
                for include_llm in (False, True):
                    walks = trails(stored_nodes, stored_edges, start, direction, hops, include_llm)
                    got = store.traverse(T, start, direction, hops, include_llm=include_llm)
                    assert got == from_paths(start, walks)


# --- tenants, checkpoints, rebuilds ---------------------------------------------------------


def test_tenants_never_see_each_other(store):
    apply_all(store, tenant="acme")
    assert store.find_nodes("globex", P, ["customer_summary"]) == {"customer_summary": []}
    assert store.get_node("globex", SUMMARY.urn) is None
    assert store.traverse("globex", REPORT.urn, "upstream", 3).nodes == ()
    assert store.edges_of_file("globex", P, "sql/report.sql") == []
    acme_counts = store.counts()
    apply_all(store, repo_files()[:2], tenant="globex")
    assert store.counts()["edges"] == acme_counts["edges"] + 4
    assert store.traverse("globex", REPORT.urn, "upstream", 3).nodes == ()
    assert [n.urn for n in store.traverse("globex", STG_ORDERS.urn, "upstream", 3).nodes] == [
        RAW_ORDERS.urn
    ]
    store.remove_file("globex", P, "models/stg_orders.sql")
    assert len(store.edges_of_file(T, P, "models/stg_orders.sql")) == 2
    acme_up = store.traverse(T, SUMMARY.urn, "upstream", 2)
    assert STG_ORDERS.urn in {n.urn for n in acme_up.nodes}
    store.apply_file("globex", P, "sql/report.sql", [REPORT], [], [])
    assert store.get_node(T, REPORT.urn) == REPORT
    assert store.edges_of_file(T, P, "sql/report.sql") != []


def test_checkpoints_start_at_zero_and_survive_writes(store):
    assert store.checkpoint("graph") == 0
    store.save_checkpoint("graph", 42)
    apply_all(store)
    assert store.checkpoint("graph") == 42
    store.save_checkpoint("graph", 43)
    assert store.checkpoint("graph") == 43
    assert store.checkpoint("other") == 0
    assert store.counts() == {"nodes": len(store.dump()[0]), "edges": 9}


def test_the_same_files_in_another_order_give_the_same_graph(store):
    apply_all(store)
    apply_all(store, chain_files())
    live = store.dump()
    store.drop()
    files = repo_files() + chain_files()
    apply_all(store, list(reversed(files)))
    apply_all(store, files[::2])
    assert store.dump() == live


def test_dump_is_sorted(store):
    apply_all(store)
    nodes, edges = store.dump()
    assert [n.urn for n in nodes] == sorted(n.urn for n in nodes)
    assert edges == sorted(edges, key=_edge_order)


def test_drop_clears_everything_and_the_store_stays_usable(store):
    apply_all(store)
    store.save_checkpoint("graph", 7)
    store.drop()
    assert store.counts() == {"nodes": 0, "edges": 0}
    assert store.checkpoint("graph") == 0
    assert store.dump() == ([], [])
    apply_all(store)
    assert store.counts()["edges"] == 9


@pytest.mark.spec("LLM-38.3")
def test_most_connected_names_rank_nodes_by_their_edges(store):
    assert store.most_connected_names(10) == []
    apply_all(store)
    apply_all(store, tenant="globex")  # names count together over tenants
    top = ["marts.customer_summary", "raw.orders", "staging.stg_orders"]  # 3 edges each
    assert store.most_connected_names(4) == [*top, "models/sources.yml"]  # 2, first by name
    assert store.most_connected_names(2) == top[:2]
    assert len(store.most_connected_names(100)) == len({n.name for n in store.dump()[0]})


def _edge_order(e: LineageEdge):
    return (e.source, str(e.rel), e.target, e.file_path, e.line_start, e.edge_id)


# --- adapters connect lazily ------------------------------------------------------------------


@pytest.mark.unit
def test_ladybug_opens_on_first_use_only(tmp_path):
    store = LadybugGraphStore(tmp_path / "never" / "opened.lbug")
    store.close()
    assert not (tmp_path / "never").exists()


@pytest.mark.unit
def test_neo4j_connects_on_first_use_only_and_hides_the_password():
    pytest.importorskip("neo4j")
    from adapters.graph_neo4j import Neo4jGraphStore

    store = Neo4jGraphStore("bolt://127.0.0.1:9", "neo4j", "s3cret-pw")  # nothing listens there
    assert "s3cret-pw" not in repr(store)
    store.close()
