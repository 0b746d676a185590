"""Reranking rules without a model: where the model comes from, the curated list, ordering,
fallback ids, and how a reranked order is applied to a caller's documents."""

from __future__ import annotations

import pytest

from domain.ports import RerankDocument
from domain.rerank import (
    CURATED_MODELS,
    HUB_URL,
    CrossEncoderSource,
    RerankScoringFailed,
    apply_reranking,
    choose_cross_encoder,
    format_model_table,
    help_examples,
    rank_by_scores,
    with_fallback_ids,
)

pytestmark = pytest.mark.unit


def test_the_path_flag_wins_then_the_name_flag_then_the_environment():
    assert choose_cross_encoder("/m", "org/flag", "/env", "org/env") == CrossEncoderSource(
        "path", "/m"
    )
    assert choose_cross_encoder(None, "org/flag", "/env", "org/env") == CrossEncoderSource(
        "name", "org/flag"
    )
    assert choose_cross_encoder(None, None, "/env", "org/env") == CrossEncoderSource("path", "/env")
    assert choose_cross_encoder(None, None, None, "org/env") == CrossEncoderSource(
        "name", "org/env"
    )
    assert choose_cross_encoder(None, "  ", "", None) is None


def test_documents_are_sorted_by_score_with_their_1_based_input_rank():
    docs = [RerankDocument(id=f"d{i}", text="") for i in range(4)]
    ranked = rank_by_scores(docs, [0.1, 0.9, 0.5, 0.9])
    assert [(r.id, r.original_rank) for r in ranked] == [
        ("d1", 2),
        ("d3", 4),  # a tie keeps the input order
        ("d2", 3),
        ("d0", 1),
    ]
    assert [r.id for r in rank_by_scores(docs, [0.1, 0.9, 0.5, 0.9], top_k=2)] == ["d1", "d3"]


def test_a_model_returning_the_wrong_number_of_scores_is_a_scoring_error():
    with pytest.raises(RerankScoringFailed, match="2 scores for 3 documents"):
        rank_by_scores(
            [RerankDocument("a", ""), RerankDocument("b", ""), RerankDocument("c", "")], [0.1, 0.2]
        )


def test_missing_ids_get_index_based_ids_that_never_collide():
    docs = [{"text": "a"}, {"id": "doc-0", "text": "b"}, {"id": "", "text": "c"}, {"id": 7}]
    filled = with_fallback_ids(docs)
    assert [d["id"] for d in filled] == ["doc-0-1", "doc-0", "doc-2", "7"]
    assert docs[0] == {"text": "a"}  # the caller's documents are not changed


def test_reranking_keeps_every_field_and_moves_the_old_score_aside():
    docs = [
        {"id": "a", "text": "x", "score": 0.8, "metadata": {"k": 1}},
        {"id": "b", "text": "y", "source": "s"},
    ]
    reranked = [
        {"id": "b", "score": 0.7, "original_rank": 2},
        {"id": "a", "score": 0.2, "original_rank": 1},
    ]
    result = apply_reranking(docs, reranked)
    assert result[0] == {
        "id": "b",
        "text": "y",
        "source": "s",
        "score": 0.7,
        "rerank_score": 0.7,
        "original_rank": 2,
    }
    assert result[1]["metadata"] == {"k": 1} and result[1]["original_score"] == 0.8
    assert result[1]["score"] == 0.2


def test_the_curated_table_groups_models_and_gives_size_latency_and_accuracy():
    table = format_model_table()
    fast, recommended, high = (table.index(t) for t in ("Fast:", "Recommended:", "High accuracy:"))
    assert fast < recommended < high
    for model in CURATED_MODELS:
        line = next(x for x in table.splitlines() if model.name in x)
        assert model.size in line and model.latency_10_docs in line and model.accuracy in line
        assert ("MB" in model.size or "GB" in model.size) and "ms" in model.latency_10_docs
    assert "Any Hugging Face cross-encoder model works" in table and HUB_URL in table


def test_the_flag_help_shows_a_fast_a_recommended_and_a_high_accuracy_example():
    text = help_examples()
    for use_case in ("fast", "recommended", "high-accuracy"):
        example = next(m for m in CURATED_MODELS if m.use_case == use_case)
        assert f"{example.name} ({example.size}, {use_case})" in text
