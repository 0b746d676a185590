"""One contract for the Embedder port, run against every adapter."""

from __future__ import annotations

import math

import pytest

from adapters.embeddings import SentenceTransformerEmbedder
from adapters.memory import HashingEmbedder

_SENTENCE_TRANSFORMER = SentenceTransformerEmbedder()  # loads lazily, once per session

ADAPTERS = [
    pytest.param(lambda: HashingEmbedder(), id="hashing", marks=pytest.mark.unit),
    pytest.param(lambda: _SENTENCE_TRANSFORMER, id="minilm", marks=[pytest.mark.integration]),
]


@pytest.fixture(params=ADAPTERS)
def embedder(request):
    embedder = request.param()
    embedder.warm_up()
    return embedder


def test_a_text_becomes_one_vector_of_the_declared_dimension(embedder):
    (vector,) = embedder.embed(["orders feed the customer summary"])
    assert len(vector) == embedder.dimension
    assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, rel_tol=1e-3)


def test_a_batch_keeps_input_order(embedder):
    texts = ["select * from orders", "def load(): pass", "# Revenue notes", "orders"]
    batch = embedder.embed(texts)
    singles = [embedder.embed([t])[0] for t in texts]
    assert len(batch) == len(texts)
    for got, expected in zip(batch, singles, strict=True):
        assert got == pytest.approx(expected, abs=1e-4)


def test_an_empty_batch_is_empty(embedder):
    assert embedder.embed([]) == []


def test_the_model_is_named(embedder):
    assert embedder.model_name
