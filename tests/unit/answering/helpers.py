"""Builders for answering unit tests."""

from __future__ import annotations

from domain.answering.context import ContextSource, GraphFact, document_id_for, source_id_for


def chunk(
    path: str = "models/orders.sql",
    index: int = 0,
    text: str = "select * from raw.orders",
    score: float = 0.8,
    *,
    project: str = "p1",
    tags: tuple[str, ...] = (),
    chunk_type: str | None = "sql_model",
    lines: tuple[int, int] | None = (1, 10),
) -> ContextSource:
    doc = document_id_for(f"urn:li:file:{project}:{path}")
    return ContextSource(
        source_id=source_id_for(doc, index),
        urn=f"urn:li:chunk:{project}:{path}#{index}",
        kind="chunk",
        document_id=doc,
        document_name=path,
        chunk_index=index,
        text=text,
        score=score,
        chunk_type=chunk_type,
        line_start=lines[0] if lines else None,
        line_end=lines[1] if lines else None,
        tags=tags,
    )


def fact(
    source: str = "customer_summary",
    target: str = "stg_orders",
    rel: str = "READS_FROM",
    *,
    project: str = "p1",
    confidence: float = 1.0,
    provenance: str = "deterministic",
) -> GraphFact:
    return GraphFact(
        source_urn=f"urn:li:dataset:{project}:{source}",
        source_name=source,
        source_kind="dbt_model",
        rel=rel,
        target_urn=f"urn:li:dataset:{project}:{target}",
        target_name=target,
        target_kind="dbt_model",
        confidence=confidence,
        provenance=provenance,
        file_path=f"models/{source}.sql",
        line_start=3,
        line_end=3,
    )
