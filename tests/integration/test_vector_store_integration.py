"""LLM-04.1: the chunk vectors live in a Qdrant collection whose dimension follows the embedding
model, keeping the chunk metadata, filterable, with the HNSW settings of the environment."""

from __future__ import annotations

import pytest

from adapters.bootstrap import build_vector_index
from adapters.qdrant_index import EmbeddingModelMismatch
from adapters.settings import Settings
from domain.ports import VectorPoint

pytestmark = pytest.mark.integration


@pytest.mark.spec("LLM-04.1")
def test_collection_keeps_metadata_filters_and_takes_hnsw_and_dimension_from_config(tmp_path):
    settings = Settings(  # type: ignore[call-arg]
        UPSTREAM_DATA_DIR=tmp_path, QDRANT_HNSW_M=32, QDRANT_HNSW_EF_CONSTRUCT=200
    )
    index = build_vector_index(settings)
    try:
        index.ensure(768, "nomic-embed-text")  # the dimension follows the configured model
        payload = {
            "tenant_id": "t",
            "file_path": "models/fct_orders.sql",
            "chunk_type": "sql_select",
            "tables": ["stg_orders"],
            "columns": ["order_id"],
        }
        index.upsert(
            [
                VectorPoint("00000000-0000-0000-0000-000000000001", [1.0] + [0.0] * 767, payload),
                VectorPoint(
                    "00000000-0000-0000-0000-000000000002",
                    [0.9] + [0.1] * 767,
                    {**payload, "chunk_type": "python_function"},
                ),
            ]
        )
        hits = index.search([1.0] + [0.0] * 767, 5, {"chunk_type": "sql_select"})
        assert [h.payload["tables"] for h in hits] == [["stg_orders"]]
        assert hits[0].payload["columns"] == ["order_id"]
        assert (index.hnsw.m, index.hnsw.ef_construct) == (32, 200)  # sent at creation
        with pytest.raises(EmbeddingModelMismatch):
            index.ensure(384, "all-MiniLM-L6-v2")  # never silently mix vector spaces
    finally:
        index.close()
