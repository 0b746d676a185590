"""Which model embeds chunks and queries: the local sentence-transformers model, or the model
configuration of the `embedding` usage type (model-config.md "Embedding model from config").

`EMBEDDING_SOURCE` decides:

- `local` (the default): `SentenceTransformerEmbedder`, all-MiniLM-L6-v2 from its package
  (384-d), exactly as before; the `embedding` configuration rows are not used. The seed
  profiles write an Ollama `nomic-embed-text` row (`default` always, `local` when Ollama
  answers), so following the rows by default would switch an offline install to a model that
  is not there, and change the vector space of a collection already built.
- `config`: `ConfiguredEmbedder`, resolved once at start-up (`Container.start` seeds a fresh
  store, catches the `model_configs` read model up from the event store, then calls
  `resolve(row)` with the active `embedding` row before anything embeds). Provider `ollama`
  gives an `OllamaEmbedder` (`POST /api/embed`). No row: the spec's 503 "Embedding model not
  configured"; a provider without embeddings: a clear error. A change of the row takes effect
  at the next start, where the vector collection refuses the other model or dimension
  (`EmbeddingModelMismatch`) until `upstream replay vectors` rebuilds it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from adapters.embeddings import SentenceTransformerEmbedder
from adapters.llm.settings import LLMSettings
from adapters.settings import Settings
from domain.errors import InvalidCommand, ServiceUnavailable, _register
from domain.model_config import ModelSelectionUnavailable, not_configured
from domain.ports import Embedder

log = logging.getLogger(__name__)

# Dimensions of common Ollama embedding models: known without asking a server that may be down.
KNOWN_DIMENSIONS: Mapping[str, int] = {
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
    "snowflake-arctic-embed": 1024,
    "bge-m3": 1024,
}


class EmbeddingUnavailable(ServiceUnavailable):
    """The embedding model could not answer (not running, timed out, model missing)."""

    code = "embedding_unavailable"
    hint = (
        "Start Ollama (`ollama serve`), pull the model (`ollama pull <model>`) and check "
        "OLLAMA_BASE_URL; or set EMBEDDING_SOURCE=local to use the built-in model."
    )


class EmbeddingProviderUnsupported(InvalidCommand):
    """The `embedding` configuration names a provider that has no embeddings."""

    code = "embedding_provider_unsupported"
    hint = "Configure the `embedding` usage type with provider `ollama` (e.g. nomic-embed-text)."


_register(EmbeddingUnavailable, EmbeddingProviderUnsupported)


def _base_name(model: str) -> str:
    return model.split(":", 1)[0]


class OllamaEmbedder:
    """Ollama's `/api/embed` behind the `Embedder` port.

    Synchronous (projections and search call it from worker threads). Batches of
    `batch_size` (50) per request, results in input order. A timeout is retried `retries`
    times (3), `base_delay * backoff_factor^(n-1)` apart (2, 4, 8 s); then, and at once for a
    refused connection, `EmbeddingUnavailable` (503) with what to do.
    """

    def __init__(
        self,
        base_url: str,
        model: str = "nomic-embed-text",
        *,
        batch_size: int = 50,
        timeout_s: float = 60.0,
        retries: int = 3,
        base_delay_s: float = 2.0,
        backoff_factor: float = 2.0,
        dimension: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.retries = retries
        self.base_delay_s = base_delay_s
        self.backoff_factor = backoff_factor
        self._dimension = dimension or KNOWN_DIMENSIONS.get(_base_name(model))
        self._sleep = sleep
        self._transport = transport
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()
        self.requests = 0

    def __repr__(self) -> str:
        return f"OllamaEmbedder(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def model_name(self) -> str:
        """Recorded by the vector collection: `ollama/<model>`."""
        return f"ollama/{self.model}"

    @property
    def dimension(self) -> int:
        """Known for common models; otherwise asked of Ollama once (one probe embedding)."""
        if self._dimension is None:
            self._dimension = len(self._embed_batch(["dimension probe"])[0])
        return self._dimension

    def warm_up(self) -> None:
        """Nothing to load: the client opens on the first call (Ollama may start later)."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed_batch(list(texts[start : start + self.batch_size])))
        return vectors

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    @property
    def client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    base_url=self.base_url,
                    timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)),
                    transport=self._transport,
                    headers={"Accept": "application/json"},
                )
            return self._client

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        attempt = 0
        while True:
            try:
                self.requests += 1
                response = self.client.post(
                    "/api/embed", json={"model": self.model, "input": batch}
                )
            except httpx.ConnectTimeout:
                raise self._not_running() from None
            except httpx.TimeoutException:
                attempt += 1
                if attempt > self.retries:
                    raise EmbeddingUnavailable(
                        f"Ollama did not answer the embedding request for {self.model} "
                        f"within {self.timeout_s:g} s ({self.retries + 1} attempts)"
                    ) from None
                delay = self.base_delay_s * self.backoff_factor ** (attempt - 1)
                log.warning(
                    "ollama embedding timeout model=%s batch=%d timeout=%ss: retry %d of %d "
                    "in %.1fs",
                    self.model,
                    len(batch),
                    self.timeout_s,
                    attempt,
                    self.retries,
                    delay,
                )
                self._sleep(delay)
                continue
            except httpx.TransportError:
                raise self._not_running() from None
            return self._vectors(response, len(batch))

    def _not_running(self) -> EmbeddingUnavailable:
        return EmbeddingUnavailable(
            f"Ollama is not running at {self.base_url}: cannot embed with {self.model}"
        )

    def _vectors(self, response: httpx.Response, expected: int) -> list[list[float]]:
        if response.status_code == 404 or (
            response.status_code >= 400 and "not found" in response.text.lower()
        ):
            raise EmbeddingUnavailable(
                f"model {self.model!r} is not available in Ollama: run `ollama pull {self.model}`"
            )
        if response.status_code >= 400:
            raise EmbeddingUnavailable(
                f"Ollama answered HTTP {response.status_code} to the embedding request for "
                f"{self.model}"
            )
        try:
            rows = response.json()["embeddings"]
            vectors = [[float(x) for x in row] for row in rows]
        except (ValueError, KeyError, TypeError):
            raise EmbeddingUnavailable(
                f"Ollama's embedding answer for {self.model} is malformed"
            ) from None
        if len(vectors) != expected:
            raise EmbeddingUnavailable(
                f"Ollama returned {len(vectors)} embeddings for {expected} texts ({self.model})"
            )
        known = self._dimension
        if known is not None and any(len(v) != known for v in vectors):
            raise EmbeddingUnavailable(
                f"Ollama returned {len(vectors[0])}-d vectors for {self.model}, expected {known}"
            )
        return vectors


class ConfiguredEmbedder:
    """The `embedding` usage type's model, chosen once at start-up by `resolve(row)`."""

    def __init__(self, llm: LLMSettings, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self._llm = llm
        self._sleep = sleep
        self._delegate: Embedder | None = None
        self.row: Mapping[str, Any] | None = None

    @property
    def resolved(self) -> bool:
        return self._delegate is not None

    def resolve(self, row: Mapping[str, Any] | None) -> Embedder:
        """Choose the model from the active `embedding` configuration row (None: none)."""
        if row is None:
            raise not_configured("embedding")
        provider, model = str(row["provider"]), str(row["model_id"])
        if provider != "ollama":
            raise EmbeddingProviderUnsupported(
                f"the embedding model configuration names provider {provider!r}, which has no "
                "embeddings here; use provider 'ollama' (e.g. nomic-embed-text), or set "
                "EMBEDDING_SOURCE=local"
            )
        llm = self._llm
        self._delegate = OllamaEmbedder(
            llm.ollama_base_url,
            model,
            batch_size=llm.ollama_embed_batch_size,
            timeout_s=llm.ollama_embed_timeout_s,
            retries=llm.local_timeout_retries,
            base_delay_s=llm.base_delay_s,
            backoff_factor=llm.backoff_factor,
            sleep=self._sleep,
        )
        self.row = dict(row)
        log.info("embedding model from configuration: %s (%s)", model, provider)
        return self._delegate

    def resolve_from(self, chain_of: Callable[[str], Sequence[Mapping[str, Any]]]) -> Embedder:
        """Resolve from the read model's `embedding` chain (`get_fallback_chain`), whose 503
        errors get a hint fit for start-up."""
        try:
            rows = chain_of("embedding")
        except ModelSelectionUnavailable as error:
            raise type(error)(
                error.message,
                hint="EMBEDDING_SOURCE=config takes the embedding model from the `embedding` "
                "model configuration: create or enable one (provider ollama, e.g. "
                "nomic-embed-text), or set EMBEDDING_SOURCE=local.",
                usage_type="embedding",
            ) from None
        return self.resolve(rows[0] if rows else None)

    @property
    def delegate(self) -> Embedder:
        if self._delegate is None:
            raise not_configured("embedding")
        return self._delegate

    @property
    def model_name(self) -> str:
        return self.delegate.model_name

    @property
    def dimension(self) -> int:
        return self.delegate.dimension

    def warm_up(self) -> None:
        self.delegate.warm_up()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.delegate.embed(texts)


def build_embedder(settings: Settings, llm: LLMSettings | None = None) -> Embedder:
    """`EMBEDDING_SOURCE=local` (default): the sentence-transformers model, as always;
    `config`: a `ConfiguredEmbedder` that `Container.start` resolves from the read model."""
    llm = llm or LLMSettings()
    if llm.embedding_source == "config":
        return ConfiguredEmbedder(llm)
    return SentenceTransformerEmbedder(
        settings.embedding_model_path, batch_size=settings.embedding_batch_size
    )
