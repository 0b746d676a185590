"""Cross-encoder reranking, the pure part (rag-providers.md, PRV-10 to PRV-14).

- where the model comes from: `--cross-encoder-path`, else `--cross-encoder`, else the
  environment (`CROSS_ENCODER_PATH`, then `CROSS_ENCODER_MODEL`), else disabled;
- the curated list of models `--list-reranker-models` prints (and the flag's help examples);
- ordering scored documents (best first, 1-based `original_rank`, `top_k`);
- what a provider's `rerank()` does around the service: ids for documents without one, and the
  reranked order applied to the caller's documents with every field they had.

The errors carry the spec's messages; `api/errors.py` maps them to 503 and 500.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from domain.errors import ServiceUnavailable, UpstreamError, _register
from domain.ports import RerankDocument, RerankedDocument

CROSS_ENCODER_NOT_LOADED = "Cross-encoder not loaded. Start server with --cross-encoder flag."
HUB_URL = "https://huggingface.co/models?pipeline_tag=text-ranking&library=sentence-transformers"
EXAMPLE_MODEL = "cross-encoder/ms-marco-MiniLM-L-6-v2"


# -- errors ---------------------------------------------------------------------------------
class CrossEncoderNotLoaded(ServiceUnavailable):
    """`POST /rerank` on a service started without a cross-encoder. HTTP 503."""

    code = "cross_encoder_not_loaded"
    hint = (
        f"Restart with `upstream serve --cross-encoder {EXAMPLE_MODEL}` (or "
        "--cross-encoder-path, or CROSS_ENCODER_MODEL); `upstream serve "
        "--list-reranker-models` lists good choices."
    )


class CrossEncoderLoadFailed(UpstreamError):
    """The requested cross-encoder could not be loaded: the service must not start."""

    code = "cross_encoder_load_failed"
    hint = (
        "Check the model name (a Hugging Face cross-encoder, cached when HF_HUB_OFFLINE=1) or "
        "the folder given to --cross-encoder-path; or start without a cross-encoder."
    )


class RerankScoringFailed(UpstreamError):
    """The model raised while scoring. HTTP 500, with the exception's details."""

    code = "rerank_failed"
    hint = "The server log has the traceback; check the documents' text and the model."


_register(CrossEncoderNotLoaded, CrossEncoderLoadFailed, RerankScoringFailed)


# -- where the model comes from -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CrossEncoderSource:
    """A model to load: a local folder (`path`) or a Hugging Face model id (`name`)."""

    kind: Literal["path", "name"]
    value: str

    def describe(self) -> str:
        return f"local path {self.value}" if self.kind == "path" else f"model {self.value}"


def choose_cross_encoder(
    flag_path: str | None,
    flag_name: str | None,
    env_path: str | None = None,
    env_name: str | None = None,
) -> CrossEncoderSource | None:
    """The spec's priority: the path flag, then the name flag, then the environment (a path,
    then a name); None when nothing asks for a cross-encoder."""
    for kind, value in (
        ("path", flag_path),
        ("name", flag_name),
        ("path", env_path),
        ("name", env_name),
    ):
        if value and str(value).strip():
            return CrossEncoderSource("path" if kind == "path" else "name", str(value).strip())
    return None


# -- the curated list -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CuratedModel:
    """A cross-encoder known to work well: size on disk, CPU latency for 10 documents."""

    name: str
    size: str
    latency_10_docs: str
    accuracy: str
    use_case: Literal["fast", "recommended", "high-accuracy"]

    def to_dict(self) -> dict[str, str]:
        return {
            "name": self.name,
            "size": self.size,
            "latency_10_docs": self.latency_10_docs,
            "accuracy": self.accuracy,
            "use_case": self.use_case,
        }


# Sizes are the weights on the Hugging Face Hub; latencies are indicative, for 10 documents of
# about 100 words on 4 CPU cores (MS MARCO figures from the models' cards).
CURATED_MODELS: tuple[CuratedModel, ...] = (
    CuratedModel(
        "cross-encoder/ms-marco-TinyBERT-L-2-v2",
        "17 MB",
        "~10 ms",
        "good (MS MARCO MRR@10 32.6)",
        "fast",
    ),
    CuratedModel(
        "cross-encoder/ms-marco-MiniLM-L-2-v2",
        "63 MB",
        "~15 ms",
        "good+ (MS MARCO MRR@10 34.9)",
        "fast",
    ),
    CuratedModel(
        "cross-encoder/ms-marco-MiniLM-L-6-v2",
        "91 MB",
        "~40 ms",
        "very good (MS MARCO MRR@10 39.0)",
        "recommended",
    ),
    CuratedModel(
        "BAAI/bge-reranker-base",
        "1.1 GB",
        "~250 ms",
        "very good, English and Chinese",
        "recommended",
    ),
    CuratedModel(
        "BAAI/bge-reranker-large",
        "2.2 GB",
        "~800 ms",
        "best of the BGE v1 rerankers, English and Chinese",
        "high-accuracy",
    ),
    CuratedModel(
        "BAAI/bge-reranker-v2-m3",
        "2.3 GB",
        "~900 ms",
        "excellent, multilingual (100+ languages)",
        "high-accuracy",
    ),
    CuratedModel(
        "mixedbread-ai/mxbai-rerank-large-v1",
        "1.7 GB",
        "~700 ms",
        "excellent, English",
        "high-accuracy",
    ),
)

USE_CASES: tuple[tuple[str, str], ...] = (
    ("fast", "Fast: low latency, small memory"),
    ("recommended", "Recommended: the best balance of speed and accuracy"),
    ("high-accuracy", "High accuracy: slower, more memory"),
)


def help_examples() -> str:
    """The `--cross-encoder` flag's help: one example per use case, with size."""
    picks = [next(m for m in CURATED_MODELS if m.use_case == case) for case, _ in USE_CASES]
    examples = "; ".join(f"{m.name} ({m.size}, {m.use_case})" for m in picks)
    return (
        f"Hugging Face cross-encoder for /rerank, e.g. {examples}. "
        "See --list-reranker-models."
    )


def format_model_table() -> str:
    """The text `--list-reranker-models` prints: grouped by use case, one model a line."""
    width = max(len(m.name) for m in CURATED_MODELS)
    lines = ["Cross-encoder models for reranking (--cross-encoder NAME)", ""]
    header = f"  {'model':<{width}}  {'size':>7}  {'10 docs':>8}  accuracy"
    for case, title in USE_CASES:
        lines += [title, header]
        for m in (m for m in CURATED_MODELS if m.use_case == case):
            lines.append(
                f"  {m.name:<{width}}  {m.size:>7}  {m.latency_10_docs:>8}  {m.accuracy}"
            )
        lines.append("")
    lines += [
        "Latency: indicative, 10 documents of about 100 words on 4 CPU cores.",
        "Any Hugging Face cross-encoder model works, not only these: "
        "--cross-encoder ORG/NAME (downloaded to the cache once),",
        "or --cross-encoder-path FOLDER for a model on disk. Explore more at:",
        f"  {HUB_URL}",
    ]
    return "\n".join(lines)


# -- ordering -------------------------------------------------------------------------------
def rank_by_scores(
    documents: Sequence[RerankDocument], scores: Sequence[float], top_k: int | None = None
) -> list[RerankedDocument]:
    """Documents best first (ties keep their input order), each with its 1-based input rank;
    every document is scored, `top_k` only cuts the answer."""
    if len(scores) != len(documents):
        raise RerankScoringFailed(
            f"the model returned {len(scores)} scores for {len(documents)} documents"
        )
    ranked = [
        RerankedDocument(id=d.id, score=float(s), original_rank=i)
        for i, (d, s) in enumerate(zip(documents, scores, strict=True), start=1)
    ]
    ranked.sort(key=lambda r: (-r.score, r.original_rank))
    return ranked if top_k is None else ranked[:top_k]


# -- around the service (a provider's rerank) ------------------------------------------------
def with_fallback_ids(documents: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copies of the documents where each has a non-empty, unique string id: a missing one is
    `doc-<index>` (with a suffix should a document already use that id)."""
    taken = {str(d["id"]) for d in documents if _has_id(d)}
    result: list[dict[str, Any]] = []
    for index, document in enumerate(documents):
        copy = dict(document)
        if _has_id(document):
            copy["id"] = str(document["id"])
        else:
            candidate, n = f"doc-{index}", 1
            while candidate in taken:
                candidate, n = f"doc-{index}-{n}", n + 1
            taken.add(candidate)
            copy["id"] = candidate
        result.append(copy)
    return result


def _has_id(document: Mapping[str, Any]) -> bool:
    value = document.get("id")
    return value is not None and str(value) != ""


def document_text(document: Mapping[str, Any]) -> str:
    """What a cross-encoder reads of a document: `text`, else `document`, else `content`."""
    for key in ("text", "document", "content"):
        value = document.get(key)
        if isinstance(value, str):
            return value
    return ""


def apply_reranking(
    documents: Sequence[Mapping[str, Any]], reranked: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The caller's documents in the reranked order, every field kept: `score` becomes the
    cross-encoder's, the previous one moves to `original_score`; `original_rank` is added.
    Unknown ids in `reranked` are ignored."""
    by_id = {str(d["id"]): d for d in documents}
    result: list[dict[str, Any]] = []
    for item in reranked:
        original = by_id.get(str(item.get("id")))
        if original is None:
            continue
        updated = dict(original)
        if "score" in original:
            updated["original_score"] = original["score"]
        updated["score"] = float(item["score"])
        updated["rerank_score"] = float(item["score"])
        updated["original_rank"] = int(item["original_rank"])
        result.append(updated)
    return result
