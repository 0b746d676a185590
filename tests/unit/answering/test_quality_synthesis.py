"""Retrieval quality controls and tree synthesis that keeps citations."""

from __future__ import annotations

import pytest

from domain.answering.budget import chunk_tokens
from domain.answering.intents import Intent, profile
from domain.answering.quality import (
    overfetch,
    select_chunks,
    select_project_context,
    text_similarity,
)
from domain.answering.synthesis import (
    carry_evidence,
    merge_partials,
    partial_groups,
    render_partials,
    synthesis_mode,
    tree_groups,
)
from tests.unit.answering.helpers import chunk

pytestmark = pytest.mark.unit

SQL = (
    "select o.id, o.amount, c.name from stg_orders o "
    "join stg_customers c on o.cid = c.id where o.amount > 0"
)


def test_text_similarity_is_word_shingle_jaccard():
    assert text_similarity(SQL, SQL) == 1.0
    assert text_similarity(SQL, SQL.upper()) == 1.0
    assert text_similarity(SQL, "completely different text about revenue") == 0.0
    assert 0.5 < text_similarity(SQL, SQL + " and o.status = 'done'") < 1.0


@pytest.mark.spec("RAG-05")
def test_candidates_below_the_minimum_similarity_are_dropped_and_top_k_applied():
    assert overfetch(5) == 15
    candidates = [
        chunk(f"m{i}.sql", 0, f"text number {i} unique words {i}", 0.9 - i * 0.1) for i in range(9)
    ]
    result = select_chunks(candidates, 3)
    assert [c.document_name for c in result.chunks] == ["m0.sql", "m1.sql", "m2.sql"]
    assert result.dropped_low_score == 3  # 0.2, 0.1, 0.0


@pytest.mark.spec("RAG-17")
def test_near_duplicate_chunks_are_removed_keeping_the_better_one():
    original = chunk("a.sql", 0, SQL, 0.8)
    copy = chunk("b.sql", 0, SQL + " ", 0.9)
    distinct = chunk("c.sql", 0, "select * from raw.payments where status = 'ok'", 0.7)
    result = select_chunks([original, copy, distinct], 5)
    assert [c.document_name for c in result.chunks] == ["b.sql", "c.sql"]
    assert result.dropped_duplicates == 1
    loose = select_chunks([original, copy, distinct], 5, overlap_threshold=1.0)
    assert loose.dropped_duplicates == 0


@pytest.mark.spec("RAG-18")
def test_at_most_three_chunks_per_document():
    same_doc = [
        chunk("big.sql", i, f"part {i} of the big model {i * 7}", 0.9 - i / 100) for i in range(5)
    ]
    other = chunk("small.sql", 0, "select 1 from dual", 0.5)
    result = select_chunks([*same_doc, other], 10)
    assert [(c.document_name, c.chunk_index) for c in result.chunks] == [
        ("big.sql", 0),
        ("big.sql", 1),
        ("big.sql", 2),
        ("small.sql", 0),
    ]
    assert result.dropped_per_doc == 2


@pytest.mark.spec("LLM-40.4")
def test_project_context_keeps_the_most_relevant_items_only():
    items = [
        (f"item {i}", s)
        for i, s in enumerate([0.9, 0.1, 0.8, 0.35, 0.7, 0.6, 0.5, 0.45, 0.4, 0.95, 0.85, 0.75])
    ]
    chosen = select_project_context(items)
    assert len(chosen) == 10 and ("item 1", 0.1) not in chosen
    assert [s for _, s in chosen] == sorted((s for _, s in chosen), reverse=True)
    assert len(select_project_context(items, limit=5)) == 5
    assert select_project_context(items, limit=50) == chosen


@pytest.mark.spec("LLM-04.2")
def test_compact_up_to_ten_chunks_tree_summarize_above():
    assert profile(Intent.SEMANTIC).top_k == 5 and profile(Intent.DEEP).top_k == 10
    assert synthesis_mode(5) == "compact" and synthesis_mode(10) == "compact"
    assert synthesis_mode(11) == "tree_summarize"


@pytest.mark.spec("LLM-35.3")
def test_tree_groups_fit_the_token_limit_and_keep_every_source_once():
    sources = [chunk(f"m{i}.sql", 0, "select a from b " * (20 + i * 10)) for i in range(12)]
    limit = chunk_tokens(sources[5]) * 2
    groups = tree_groups(sources, limit)
    assert [s for g in groups for s in g] == sources
    for group in groups:
        assert len(group) == 1 or sum(chunk_tokens(s) for s in group) <= limit
    assert len(groups) > 1
    assert tree_groups(sources, 1) == [[s] for s in sources]


@pytest.mark.spec("LLM-04.3", "LLM-35.3")
def test_citations_and_evidence_survive_every_level():
    a, b, c = (chunk(f"m{i}.sql", 0) for i in range(3))
    leaves = [
        {
            "answer": f"x reads from y [SourceId: {a.source_id}]",
            "evidence": [{"type": "chunk", "id": a.urn, "note": ""}],
            "next_actions": ["check y"],
            "warnings": [],
            "citations": [{"source_id": a.source_id}],
        },
        {
            "answer": f"y reads from z [SourceId: {b.source_id}]",
            "evidence": [
                {"type": "chunk", "id": b.urn, "note": ""},
                {"type": "chunk", "id": a.urn},
            ],
            "next_actions": ["check y"],
            "warnings": ["z is ambiguous"],
        },
        {
            "answer": f"z is a seed [SourceId: {c.source_id}]",
            "evidence": [{"type": "chunk", "id": c.urn, "note": ""}],
            "next_actions": [],
            "warnings": [],
            "citations": [{"source_id": c.source_id}],
        },
    ]
    level_one = [merge_partials(leaves[:2]), merge_partials(leaves[2:])]
    assert [e["id"] for e in level_one[0]["evidence"]] == [a.urn, b.urn]
    assert level_one[0]["next_actions"] == ["check y"]
    assert a.source_id in level_one[0]["answer"] and b.source_id in level_one[0]["answer"]
    prompt = render_partials(level_one)
    assert f"Evidence: {a.urn}, {b.urn}" in prompt and c.source_id in prompt
    final = carry_evidence(
        {"answer": "x <- y <- z", "evidence": [{"type": "chunk", "id": c.urn}], "warnings": []},
        level_one,
    )
    assert [e["id"] for e in final["evidence"]] == [c.urn, a.urn, b.urn]
    assert [x["source_id"] for x in final["citations"]] == [a.source_id, c.source_id]
    assert final["warnings"] == ["z is ambiguous"]
    assert [len(g) for g in partial_groups(leaves, 10**6)] == [3]
