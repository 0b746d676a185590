"""The one place that knows the profile: builds the embedded or the production set of parts."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from prometheus_client import CollectorRegistry

from adapters.cache_wiring import build_caches
from adapters.cross_encoder import build_reranker, start_reranker
from adapters.duckdb_model_configs import DuckDBModelConfigs
from adapters.embedding_selection import ConfiguredEmbedder, build_embedder
from adapters.kg_wiring import build_kg, start_kg_policy
from adapters.llm.settings import LLMSettings, build_llm_providers
from adapters.model_discovery import ModelDiscovery
from adapters.qdrant_collections import QdrantCollections
from adapters.qdrant_index import EmbeddingModelMismatch, QdrantVectorIndex
from adapters.settings import Settings
from commands.application import UpstreamApplication
from domain.errors import NotCaughtUp, UnknownProjection, UpstreamError
from domain.ports import Embedder, Projection, VectorIndex
from projections.collections import CollectionsProjection
from projections.graph import GraphProjection
from projections.model_configs import ModelConfigsProjection
from projections.rebuild import catch_up, rebuild
from projections.tag_owners import TagOwnersProjection
from projections.vectors import VectorsProjection
from queries.free_tier import FreeTierPolicy, seed_cloud_model_ids
from queries.gateway import Gateway, GatewayConfig
from queries.lineage import LineageService
from queries.model_override import ModelValidator
from queries.ollama_health import OllamaHealthConfig, OllamaHealthMonitor
from queries.search import SearchService
from queries.tag_owners import TagOwners

log = logging.getLogger("upstream.bootstrap")

Role = Literal["serve", "api", "worker", "offline"]


class DataDirLocked(UpstreamError):
    code = "data_dir_locked"
    hint = "Stop the other `upstream serve` using this data dir, or set UPSTREAM_DATA_DIR."


@dataclass
class StartupStep:
    name: str
    seconds: float


@dataclass
class Container:
    """Every part of a running upstream process, built by `bootstrap()`."""

    settings: Settings
    role: Role
    app: UpstreamApplication
    embedder: Embedder
    index: VectorIndex
    projections: dict[str, Projection]
    search: SearchService
    graph: Any
    lineage: LineageService
    nats_url: str | None = None
    nats_server: Any = None
    broker: Any = None
    command_bus: Any = None
    relay: Any = None
    reindex: Any = None
    model_configs: Any = None
    model_discovery: Any = None
    gateway: Any = None
    metrics_registry: Any = None
    collections: Any = None
    reranker: Any = None  # the cross-encoder behind /rerank; None when disabled
    rag_providers: Any = None  # adapters.rag.connections.RagConnections
    ollama_health: Any = None
    free_tier: Any = None
    embedding_config: Any = None  # the ConfiguredEmbedder when EMBEDDING_SOURCE=config
    model_validator: Any = None  # queries.model_override.ModelValidator
    answer_cache: Any = None  # queries.answer_cache.AnswerCache
    caches: Any = None  # adapters.cache_wiring.Caches
    chat: Any = None
    tag_owners: Any = None  # queries.tag_owners.TagOwners
    kg: Any = None  # queries.kg.KGService (LLM-proposed edges, history, runs)
    runners: dict[str, Any] = field(default_factory=dict)
    projection_locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    startup: list[StartupStep] = field(default_factory=list)
    started_at: float | None = None
    _nc: Any = None
    _lock_file: Any = None

    def __post_init__(self) -> None:
        if self.rag_providers is None:  # built here: the builtin provider reads the container
            from adapters.rag.connections import build_rag_connections

            self.rag_providers = build_rag_connections(self)

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        began = time.perf_counter()
        if self.settings.profile == "embedded" and self.role in ("serve", "offline"):
            self._step("lock data dir", self._lock_data_dir)
        if self.reranker is None:
            await start_reranker(None, self.role)  # says it is disabled and how to enable it
        else:
            await self._astep("cross-encoder", lambda: start_reranker(self.reranker, self.role))
        if self.role != "offline":
            await self._astep("bus", self._start_bus)
        await self._astep("embedder", self._warm_up_embedder)
        await self._astep("vector store", lambda: asyncio.to_thread(self._ensure_read_models))
        if self.role == "api":
            await self._astep("model configurations", self._follow_model_configs)
        if self.role in ("serve", "worker"):
            await self._astep("catch up read models", self._catch_up_all)
            await self._astep("command handlers, relay, projections", self._start_write_side)
            self._start_reindex_schedule()
            await self._astep("model configurations", self._seed_model_configs)
        if self.ollama_health is not None and self.role != "offline":
            await self._astep("ollama health", self.ollama_health.start)
        if self.caches is not None:
            await self._astep("caches", self.caches.start)
        if self.role != "offline":
            await self._astep("broker", self.broker.start)
        self.started_at = time.time()
        log.info(
            "upstream %s ready in %.1f s (profile %s)",
            self.role,
            time.perf_counter() - began,
            self.settings.profile,
        )

    async def stop(self) -> None:
        if self.reindex is not None:
            await self.reindex.stop()
        for runner in self.runners.values():
            await runner.stop()
        if self.relay is not None:
            await self.relay.stop()
        if self.broker is not None:
            with contextlib.suppress(Exception):
                await self.broker.stop()
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.drain()
        if self.nats_server is not None:
            self.nats_server.stop()
        self.index.close()
        self.graph.close()
        if self.model_configs is not None:
            self.model_configs.close()
        if self.ollama_health is not None:
            await self.ollama_health.stop()
        if self.gateway is not None:
            await self.gateway.aclose()
        if self.collections is not None:
            self.collections.close()
        if self.kg is not None:
            self.kg.store.close()
        if self.rag_providers is not None:
            await self.rag_providers.aclose()
        if self.caches is not None:
            await self.caches.stop()
        self.app.close()
        if self._lock_file is not None:
            self._lock_file.close()
        log.info("upstream %s stopped", self.role)

    def _step(self, name: str, action: Any) -> None:
        began = time.perf_counter()
        action()
        self._record_step(name, began)

    async def _astep(self, name: str, action: Any) -> None:
        began = time.perf_counter()
        await action()
        self._record_step(name, began)

    def _record_step(self, name: str, began: float) -> None:
        seconds = time.perf_counter() - began
        self.startup.append(StartupStep(name, round(seconds, 3)))
        log.info("start-up: %s ok (%.2f s)", name, seconds)

    def _lock_data_dir(self) -> None:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        lock_path = self.settings.data_dir / "upstream.lock"
        handle = lock_path.open("w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            handle.close()
            raise DataDirLocked(
                f"another upstream process is using {self.settings.data_dir}"
            ) from error
        self._lock_file = handle

    async def _start_bus(self) -> None:
        import nats
        from faststream.nats import NatsBroker

        from bus.command_bus import CommandBus
        from bus.nats_server import EmbeddedNatsServer

        url: str | None = self.settings.nats_url
        if url is None:
            self.nats_server = EmbeddedNatsServer(
                self.settings.data_dir / "nats", self.settings.nats_server_bin
            )
            # Started from the loop thread: PR_SET_PDEATHSIG follows the thread that forks.
            url = self.nats_server.start()
        assert url is not None
        self.nats_url = url
        self._nc = await nats.connect(
            url, max_reconnect_attempts=-1, reconnect_time_wait=0.5, name=f"upstream-{self.role}"
        )
        self.broker = NatsBroker(
            url,
            max_reconnect_attempts=-1,
            reconnect_time_wait=1,
            log_level=logging.DEBUG,  # one line per command is too much at INFO
            name=f"upstream-{self.role}-commands",
        )
        self.command_bus = CommandBus(self.broker)

    async def _seed_model_configs(self) -> None:
        """On a fresh store, seed model configurations so the service answers at once:
        `default` (the free OpenRouter models) with a key, else `local` (Ollama first when
        it answers, `extractive` last: offline answers)."""
        from commands.model_config import SeedModelConfigs
        from domain.model_config import ModelConfigsAlreadyExist

        profile = self.settings.seed_profile
        if profile == "none":
            return
        discovery = self.model_discovery
        if profile == "auto":
            has_key = discovery is not None and discovery.settings.openrouter_api_key
            profile = "default" if has_key else "local"
        ollama = await self._reachable_ollama()
        command = SeedModelConfigs(
            profile=profile, ollama_base_url=ollama, actor="upstream", reason="first start"
        )
        try:
            result = await asyncio.to_thread(self.app.seed_model_configs, command)
        except ModelConfigsAlreadyExist:
            return
        log.info("seeded the %s model configurations (position %s)", profile, result.position)
        if self.relay is not None:
            self.relay.wake()

    async def _reachable_ollama(self) -> str | None:
        if self.model_discovery is None:
            return None
        try:
            await asyncio.wait_for(self.model_discovery.ollama_models(), 2.0)
        except Exception:
            return None
        return str(self.model_discovery.settings.ollama_base_url)

    def _start_reindex_schedule(self) -> None:
        if not self.settings.reindex_schedule:
            return
        from domain.index_tuning import CronSchedule
        from queries.index_maintenance import ReindexJob

        schedule = CronSchedule.parse(self.settings.reindex_schedule)
        self.reindex = ReindexJob(self.index, self.embedder, schedule)
        self.reindex.start()
        log.info("index maintenance scheduled: %s", self.settings.reindex_schedule)

    async def _warm_up_embedder(self) -> None:
        """EMBEDDING_SOURCE=config: the model comes from the `embedding` configuration, so a
        fresh store is seeded and the model_configs read model caught up before it resolves."""
        selection = self.embedding_config
        if selection is not None and not selection.resolved:
            if self.role in ("serve", "worker"):
                await self._seed_model_configs()
            await asyncio.to_thread(self._resolve_embedding_model, selection)
        await asyncio.to_thread(self.embedder.warm_up)

    def _resolve_embedding_model(self, selection: ConfiguredEmbedder) -> None:
        projection = self.projections["model_configs"]
        getattr(projection, "start")()  # noqa: B009 - DuckDB tables before the catch-up
        catch_up(projection, self.app, self.settings.projection_batch_size)
        selection.resolve_from(self.model_configs.get_fallback_chain)

    async def _follow_model_configs(self) -> None:
        """The api keeps its own DuckDB model_configs (one writer per file): it catches up from
        the event store, then follows the configuration events on a consumer of its own."""
        from bus.process_projection_runner import MODEL_CONFIG_SUBJECTS, ProcessProjectionRunner

        projection = self.projections["model_configs"]
        batch = self.settings.projection_batch_size
        runner = ProcessProjectionRunner(
            self._nc.jetstream(),
            projection,
            self._lock_of(projection.name),
            subjects=MODEL_CONFIG_SUBJECTS,
            batch_size=batch,
        )
        applied = await runner.follow(lambda: catch_up(projection, self.app, batch))
        self.runners[projection.name] = runner
        log.info("model_configs: %d events caught up, following %s", applied, runner.durable)

    def _ensure_read_models(self) -> None:
        for projection in self.projections.values():
            start = getattr(projection, "start", None)
            if start is None:
                continue
            try:
                start()
            except EmbeddingModelMismatch as error:
                if self.role != "offline":
                    raise
                # `upstream replay vectors` (offline) drops the collection and rebuilds it.
                log.warning("%s (%s)", error.message, error.detail_hint)

    async def _catch_up_all(self) -> None:
        for projection in self.projections.values():
            applied = await asyncio.to_thread(
                catch_up, projection, self.app, self.settings.projection_batch_size
            )
            if applied:
                log.info(
                    "projection %s caught up %d events from the store", projection.name, applied
                )

    async def _start_write_side(self) -> None:
        from bus.intake import register_command_handlers
        from bus.projection_runner import ProjectionRunner
        from bus.relay import Relay

        js = self._nc.jetstream()
        self.relay = Relay(self.app, js)
        register_command_handlers(self.broker, self.app, self.relay.wake)
        await self.relay.start()
        for projection in self.projections.values():
            runner = ProjectionRunner(
                js, projection, self._lock_of(projection.name), self.settings.projection_batch_size
            )
            await runner.start()
            self.runners[projection.name] = runner
        self.runners["kg_enrichment"] = await start_kg_policy(self, js)

    # -- read-your-writes ---------------------------------------------------------------
    def read_model_position(self, name: str) -> int:
        if self.role == "api":  # another process applies events: read its checkpoint
            if name == "cache" and self.caches is not None:
                return int(self.caches.read_model_position())
            if name == "tag_owners" and self.tag_owners is not None:
                return int(self.tag_owners.position())  # follows the event store itself
            stores = {"graph": self.graph, "model_configs": self.model_configs}
            return int(stores.get(name, self.index).checkpoint(name))
        return self.projections[name].position()

    async def wait_for(self, position: int, timeout_s: float | None = None) -> None:
        deadline = time.monotonic() + (timeout_s or self.settings.wait_timeout_s)
        while True:
            behind = [n for n in self.projections if self.read_model_position(n) < position]
            if not behind:
                return
            if time.monotonic() > deadline:
                raise NotCaughtUp(
                    f"read models {', '.join(behind)} have not reached position {position} yet"
                )
            await asyncio.sleep(0.02)

    async def replay(self, name: str | None = None) -> dict[str, int]:
        names = [name] if name else list(self.projections)
        unknown = [n for n in names if n not in self.projections]
        if unknown:
            raise UnknownProjection(
                f"no projection named {unknown[0]!r}; known: {', '.join(self.projections)}"
            )
        applied: dict[str, int] = {}
        for n in names:
            async with self._lock_of(n):  # the live runner waits while its read model rebuilds
                applied[n] = await asyncio.to_thread(
                    rebuild, self.projections[n], self.app, self.settings.projection_batch_size
                )
        if self.caches is not None:
            await self.caches.after_replay(names)
        return applied

    def _lock_of(self, name: str) -> asyncio.Lock:
        return self.projection_locks.setdefault(name, asyncio.Lock())


def build_vector_index(settings: Settings) -> QdrantVectorIndex:
    common: dict[str, Any] = {
        "hnsw_m": settings.qdrant_hnsw_m,
        "hnsw_ef_construct": settings.qdrant_hnsw_ef_construct,
    }
    if settings.qdrant_url:
        key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return QdrantVectorIndex(
            settings.qdrant_collection, url=settings.qdrant_url, api_key=key, **common
        )
    path: Path = settings.qdrant_path or settings.data_dir / "qdrant"
    return QdrantVectorIndex(settings.qdrant_collection, path=path, **common)


def build_graph_store(settings: Settings) -> Any:
    if settings.neo4j_uri:
        from adapters.graph_neo4j import Neo4jGraphStore

        return Neo4jGraphStore(
            settings.neo4j_uri,
            settings.neo4j_user,
            settings.neo4j_password.get_secret_value(),
            settings.neo4j_database,
        )
    from adapters.graph_ladybug import LadybugGraphStore

    return LadybugGraphStore(settings.graph_path or settings.data_dir / "graph")


def build_collections(settings: Settings) -> QdrantCollections:
    if settings.qdrant_url:
        key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return QdrantCollections(url=settings.qdrant_url, api_key=key)
    # Local mode locks its folder: the collections cannot share the chunk vectors' path.
    return QdrantCollections(path=settings.data_dir / "qdrant_collections")


def build_ollama_health(
    llm: LLMSettings, providers: Any, model_configs: Any, fallback: Any = None
) -> Any:
    from domain.llm import ChainEntry
    from domain.model_config import UsageType

    def chains() -> dict[str, list[ChainEntry]]:
        return {
            u.value: [ChainEntry.from_row(r) for r in model_configs.fallback_chain(u.value)]
            for u in UsageType
        }

    config = OllamaHealthConfig(
        interval_s=llm.ollama_health_interval_s,
        timeout_s=llm.ollama_health_timeout_s,
        use_quantized=llm.ollama_use_quantized,
        quantization=llm.ollama_quantization,
        memory_budget_mb=llm.ollama_memory_mb,
        min_memory_mb=llm.ollama_min_memory_mb,
        max_context_window=llm.ollama_context_window,
        min_context_window=llm.ollama_min_context_window,
        kv_mb_per_token=llm.ollama_kv_mb_per_token,
        fallback_provider=fallback.provider if fallback is not None else None,
        fallback_model=fallback.model_id if fallback is not None else None,
    )
    return OllamaHealthMonitor(
        providers["ollama"],
        [llm.ollama_chat_model, llm.ollama_embedding_model],
        config,
        time.time,
        chains=chains,
    )


def build_chat(
    settings: Settings,
    embedder: Embedder,
    index: VectorIndex,
    graph: Any,
    model_configs: Any,
    gateway: Gateway,
    free_tier: FreeTierPolicy,
    registry: CollectorRegistry,
    answer_cache: Any = None,
    owner_of: Any = None,
    config_version: Any = None,
    local_window: Any = None,
    model_validator: Any = None,
    reranker: Any = None,
    temperatures: dict[str, float] | None = None,
) -> Any:
    from queries.chat import ChainCache, ChatConfig, ChatService
    from queries.retrieval import edge_checker, make_pipelines

    pipelines = make_pipelines(
        embedder,
        index,
        graph,
        min_score=settings.rag_min_similarity_score,
        max_per_doc=settings.rag_max_chunks_per_doc,
        overlap_threshold=settings.rag_chunk_overlap_threshold,
        reranker=reranker,
    )
    config = ChatConfig(
        confidence_threshold=settings.rag_confidence_threshold,
        admin_email=settings.rag_admin_email,
        default_pipeline=settings.rag_pipeline,
        deep_context_tokens=settings.rag_deep_context_tokens,
        llm_confidence=settings.rag_llm_confidence,
        response_tokens=settings.rag_max_response_tokens,
        context_tokens=settings.rag_max_context_tokens,
        history_tokens=settings.rag_max_history_tokens,
        temperatures=dict(temperatures or {}),
    )
    version = config_version or (lambda: int(model_configs.checkpoint("model_configs")))
    chains = ChainCache(model_configs, version)
    return ChatService(
        pipelines=pipelines,
        gateway=gateway,
        chains=chains.chain,
        model_validator=model_validator,
        free_tier=free_tier,
        edge_exists=edge_checker(graph),
        owner_of=owner_of or (lambda _tenant, _tag: None),
        config=config,
        registry=registry,
        answer_cache=answer_cache,
        chain_version=lambda: str(version()),
        local_window=local_window,
    )



def bootstrap(
    settings: Settings | None = None,
    role: Role = "serve",
    *,
    embedder: Embedder | None = None,
    index: VectorIndex | None = None,
    app: UpstreamApplication | None = None,
    graph: Any = None,
) -> Container:
    """Build (without connecting) every part the role needs; tests pass their own pieces."""
    settings = settings or Settings()
    llm = LLMSettings()
    embedder = embedder or build_embedder(settings, llm)  # EMBEDDING_SOURCE (default local)
    embedding_config = embedder if isinstance(embedder, ConfiguredEmbedder) else None
    index = index or build_vector_index(settings)
    app = app or UpstreamApplication(
        env=settings.event_store_env(),
        max_file_bytes=settings.max_file_bytes,
        count_tokens=getattr(embedder, "count_tokens", None),
        max_tokens=settings.embedding_max_tokens,
    )
    graph = graph or build_graph_store(settings)
    caches = build_caches(settings, embedder, graph, app, role)
    embedder = caches.embedder  # ingestion, search and chat embed through the cache
    vectors = VectorsProjection(embedder, index)
    graph_projection = GraphProjection(graph)
    # One DuckDB per query-serving process: DuckDB allows one writer per file.
    model_configs = DuckDBModelConfigs(settings.data_dir / f"model_configs.{role}.duckdb")
    configs_projection = ModelConfigsProjection(model_configs)
    registry = CollectorRegistry()  # one per process: /metrics and the gateway's counters
    providers = build_llm_providers(llm)
    gateway_config = GatewayConfig(**llm.gateway_options())
    ollama_health = build_ollama_health(
        llm, providers, model_configs, gateway_config.inference_fallback
    )
    gateway = Gateway(
        providers,
        config=gateway_config,
        registry=registry,
        provider_health=ollama_health.provider_health,
        model_resolver=ollama_health.model_for,
    )
    discovery = ModelDiscovery()
    free_tier = FreeTierPolicy(
        discovery,
        seed_cloud_model_ids(),
        default_model=llm.free_tier_default_model,
        registry=registry,
    )
    collections = build_collections(settings)
    collections_projection = CollectionsProjection(collections)
    kg = build_kg(settings, role, model_configs)
    reranker = build_reranker(settings) if role in ("serve", "api") else None
    tag_owners_projection = TagOwnersProjection(source=app)  # in memory, filled at each start
    refresh = tag_owners_projection.follow if role == "api" else None  # api runs no projection
    tag_owners = TagOwners(tag_owners_projection.book, refresh)
    model_validator = ModelValidator(
        lambda: model_configs.list_configs(enabled=True),
        providers["ollama"],
        cloud_providers=set(providers) & {"openrouter", "groq"},
        ollama_base_url=llm.ollama_base_url,
    )
    chat = build_chat(
        settings,
        embedder,
        index,
        graph,
        model_configs,
        gateway,
        free_tier,
        registry,
        answer_cache=caches.answers,
        owner_of=tag_owners.owner_of,
        config_version=configs_projection.position,
        local_window=ollama_health.context_window,
        model_validator=model_validator,
        reranker=reranker,
        temperatures=llm.temperatures(),
    )
    return Container(
        settings=settings,
        role=role,
        app=app,
        embedder=embedder,
        index=index,
        projections={
            vectors.name: vectors,
            graph_projection.name: graph_projection,
            configs_projection.name: configs_projection,
            collections_projection.name: collections_projection,
            tag_owners_projection.name: tag_owners_projection,
            kg.projection.name: kg.projection,
            **caches.projections(),
        },
        search=SearchService(embedder, index, reranker=reranker),
        graph=graph,
        lineage=LineageService(graph),
        model_configs=model_configs,
        model_discovery=discovery,
        gateway=gateway,
        metrics_registry=registry,
        collections=collections,
        reranker=reranker,
        ollama_health=ollama_health,
        free_tier=free_tier,
        embedding_config=embedding_config,
        model_validator=model_validator,
        answer_cache=caches.answers,
        caches=caches,
        chat=chat,
        tag_owners=tag_owners,
        kg=kg.service,
    )
