"""The `Reranker` port over a sentence-transformers `CrossEncoder` (local folder or Hub model).

Nothing is loaded at import or construction: `warm_up()` loads the model once at start-up
(the service refuses to start when it fails). A Hub name is resolved through the Hugging Face
cache (`CROSS_ENCODER_CACHE_DIR`, else the default cache); with `HF_HUB_OFFLINE=1` only a
cached model loads.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from domain.ports import RerankDocument, RerankedDocument
from domain.rerank import (
    EXAMPLE_MODEL,
    CrossEncoderLoadFailed,
    CrossEncoderSource,
    RerankScoringFailed,
    choose_cross_encoder,
    rank_by_scores,
)

log = logging.getLogger("upstream.rerank")


class CrossEncoderReranker:
    """Scores (query, document) pairs with a cross-encoder; one model per process."""

    def __init__(
        self,
        source: CrossEncoderSource,
        *,
        cache_dir: Path | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
        device: str = "cpu",
    ) -> None:
        self.source = source
        self.cache_dir = cache_dir
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return self.source.value

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def model(self) -> Any:
        """The loaded `sentence_transformers.CrossEncoder` (None before `warm_up`)."""
        return self._model

    def warm_up(self) -> None:
        if self._model is not None:
            return
        if self.source.kind == "path" and not Path(self.source.value).is_dir():
            raise CrossEncoderLoadFailed(
                f"cannot load the cross-encoder: {self.source.value} is not a folder"
            )
        from sentence_transformers import CrossEncoder

        options: dict[str, Any] = {"device": self.device}
        if self.max_length is not None:
            options["max_length"] = self.max_length
        if self.source.kind == "name" and self.cache_dir is not None:
            options["cache_folder"] = str(self.cache_dir)
        try:
            self._model = CrossEncoder(self.source.value, **options)
        except Exception as error:
            raise CrossEncoderLoadFailed(
                f"cannot load the cross-encoder {self.source.describe()}: "
                f"{type(error).__name__}: {error}"
            ) from error
        log.info("cross-encoder loaded from %s", self.source.describe())

    def rerank(
        self, query: str, documents: Sequence[RerankDocument], top_k: int | None = None
    ) -> list[RerankedDocument]:
        if not documents:
            return []
        self.warm_up()
        pairs = [(query, d.text) for d in documents]
        try:
            with self._lock:  # one forward pass at a time: predictable memory and latency
                scores = self._model.predict(
                    pairs, batch_size=self.batch_size, show_progress_bar=False
                )
        except Exception as error:
            log.exception("cross-encoder scoring failed")
            raise RerankScoringFailed(
                f"cross-encoder scoring failed: {type(error).__name__}: {error}"
            ) from error
        return rank_by_scores(documents, _relevance(scores), top_k)


def _relevance(scores: Any) -> list[float]:
    """One float per pair: a one-label model's output (a list of one is unwrapped)."""
    values = scores.tolist() if hasattr(scores, "tolist") else list(scores)
    flat = [v[0] if isinstance(v, list) and len(v) == 1 else v for v in values]
    if any(isinstance(v, list) for v in flat):
        raise RerankScoringFailed(
            f"the model returns {len(flat[0])} scores per pair; a reranker needs a "
            "cross-encoder with one output (num_labels=1)"
        )
    return [float(v) for v in flat]


def build_reranker(settings: Any) -> CrossEncoderReranker | None:
    """The reranker the settings ask for (`cross_encoder_path`, then `cross_encoder_model`);
    None when disabled. Built unloaded: the container's start loads it."""
    source = choose_cross_encoder(
        None,
        None,
        _text(getattr(settings, "cross_encoder_path", None)),
        _text(getattr(settings, "cross_encoder_model", None)),
    )
    if source is None:
        return None
    cache_dir = getattr(settings, "cross_encoder_cache_dir", None)
    return CrossEncoderReranker(source, cache_dir=cache_dir)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


async def start_reranker(reranker: CrossEncoderReranker | None, role: str) -> None:
    """At start-up: load the cross-encoder (a failure is logged as fatal and raised, so the
    service does not start), or, when disabled, say so and how to enable it."""
    if reranker is None:
        if role in ("serve", "api"):
            log.info("cross-encoder disabled: POST /rerank answers 503")
            log.info(
                "to enable reranking start with --cross-encoder %s (or --cross-encoder-path "
                "FOLDER, or CROSS_ENCODER_MODEL)",
                EXAMPLE_MODEL,
            )
            log.info("run `upstream serve --list-reranker-models` for the recommended models")
        return
    try:
        await asyncio.to_thread(reranker.warm_up)
    except Exception as error:
        log.critical("fatal: %s; not starting", error)
        raise
