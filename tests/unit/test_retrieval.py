"""Retrieval pieces: question direction, tag-aware vector search, reranking opt-in, and the
streaming answer extractor."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from adapters.memory import HashingEmbedder, InMemoryVectorIndex
from domain.ports import RerankDocument, RerankedDocument, VectorPoint
from queries.chat import AnswerFieldExtractor
from queries.retrieval import RetrievalQuery, VectorRetriever, lineage_direction

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("question", "direction"),
    [
        ("What feeds customer_summary?", "upstream"),
        ("What are the upstream sources of fct_payments?", "upstream"),
        ("Where does dim_customers come from?", "upstream"),
        ("What breaks if stg_orders changes?", "downstream"),
        ("What depends on int_orders__enriched?", "downstream"),
        ("Who uses stg_payments?", "downstream"),
        ("Explain fct_orders", "both"),
    ],
)
def test_lineage_direction_of_a_question(question, direction):
    assert lineage_direction(question) == direction


def _index(embedder: HashingEmbedder) -> InMemoryVectorIndex:
    index = InMemoryVectorIndex()
    texts = {
        "a.sql": ("select revenue from orders", []),
        "b.sql": ("select revenue, refunds from orders join payments", ["finance"]),
        "c.sql": ("select salary from employees", ["hr"]),
    }
    points = []
    for n, (path, (text, tags)) in enumerate(sorted(texts.items())):
        payload = {
            "urn": f"urn:li:chunk:p:{path}#0",
            "file_urn": f"urn:li:file:p:{path}",
            "path": path,
            "project_id": "p",
            "tenant_id": "t",
            "tags": tags,
            "text": text,
            "chunk_index": 0,
            "chunk_type": "sql",
        }
        points.append(VectorPoint(str(n), embedder.embed([text])[0], payload))
    index.upsert(points)
    return index


def test_vector_search_applies_the_callers_tags():
    embedder = HashingEmbedder()
    retriever = VectorRetriever(embedder, _index(embedder), min_score=0.0)
    vector = retriever.embed("revenue orders")
    untagged = RetrievalQuery(text="revenue orders", tenant_id="t", top_k=5)
    finance = RetrievalQuery(text="revenue orders", tenant_id="t", top_k=5, user_tags=("finance",))
    assert {c.document_name for c in retriever.search(vector, untagged, 5)[0]} == {"a.sql"}
    assert {c.document_name for c in retriever.search(vector, finance, 5)[0]} == {"a.sql", "b.sql"}


class ReversingReranker:
    model_name = "reversing"

    def warm_up(self) -> None:
        return None

    def rerank(
        self, query: str, documents: Sequence[RerankDocument], top_k: int | None = None
    ) -> list[RerankedDocument]:
        ranked = [RerankedDocument(d.id, float(i), i + 1) for i, d in enumerate(documents)]
        return list(reversed(ranked))[:top_k]


class FailingReranker(ReversingReranker):
    def rerank(self, query, documents, top_k=None):
        raise RuntimeError("model crashed")


@pytest.mark.parametrize(
    ("reranker", "reversed_order"), [(ReversingReranker(), True), (FailingReranker(), False)]
)
def test_chat_retrieval_can_opt_into_reranking_and_survives_a_failing_model(
    reranker, reversed_order
):
    embedder = HashingEmbedder()
    retriever = VectorRetriever(embedder, _index(embedder), min_score=0.0, reranker=reranker)
    query = RetrievalQuery(text="revenue orders", tenant_id="t", top_k=5, user_tags=("finance",))
    vector = retriever.embed(query.text)
    plain = [c.urn for c in retriever.search(vector, query, 5)[0]]
    ranked = [c.urn for c in retriever.search(vector, _with_rerank(query), 5)[0]]
    assert ranked == (list(reversed(plain)) if reversed_order else plain)


def _with_rerank(query: RetrievalQuery) -> RetrievalQuery:
    from dataclasses import replace

    return replace(query, rerank=True)


def test_the_extractor_streams_only_the_answer_text_with_escapes_decoded():
    text = json.dumps({"answer": 'a "quoted" \\ line\nnext ünï', "evidence": [], "warnings": []})
    extractor = AnswerFieldExtractor()
    out = "".join(extractor.feed(text[i : i + 3]) for i in range(0, len(text), 3))
    assert out == 'a "quoted" \\ line\nnext ünï'
    assert extractor.done
