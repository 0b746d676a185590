"""All configuration, from the environment (and `.env`), validated once."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Unset server URLs mean the embedded profile: nothing to configure, one process."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    data_dir: Path = Field(default=Path(".upstream"), alias="UPSTREAM_DATA_DIR")
    host: str = Field(default="127.0.0.1", alias="UPSTREAM_HOST")
    port: int = Field(default=8000, alias="UPSTREAM_PORT")
    log_level: str = Field(default="INFO", alias="UPSTREAM_LOG_LEVEL")
    max_file_bytes: int = Field(default=1_000_000, alias="UPSTREAM_MAX_FILE_BYTES", gt=0)
    git_allow_local: bool = Field(default=False, alias="UPSTREAM_GIT_ALLOW_LOCAL")
    git_timeout_s: float = Field(default=300.0, alias="UPSTREAM_GIT_TIMEOUT", gt=0)
    max_upload_bytes: int = Field(default=100_000_000, alias="UPSTREAM_MAX_UPLOAD_BYTES", gt=0)
    max_archive_files: int = Field(default=20_000, alias="UPSTREAM_MAX_ARCHIVE_FILES", gt=0)
    wait_timeout_s: float = Field(default=300.0, alias="UPSTREAM_WAIT_TIMEOUT", gt=0)

    nats_url: str | None = Field(default=None, alias="NATS_URL")
    nats_server_bin: str | None = Field(default=None, alias="NATS_SERVER_BIN")

    persistence_module: Literal["eventsourcing.sqlite", "eventsourcing.postgres"] = Field(
        default="eventsourcing.sqlite", alias="PERSISTENCE_MODULE"
    )
    postgres_dbname: str = Field(default="upstream", alias="POSTGRES_DBNAME")
    postgres_host: str = Field(default="127.0.0.1", alias="POSTGRES_HOST")
    postgres_port: int = Field(default=5432, alias="POSTGRES_PORT")
    postgres_user: str = Field(default="postgres", alias="POSTGRES_USER")
    postgres_password: SecretStr = Field(default=SecretStr(""), alias="POSTGRES_PASSWORD")
    postgres_schema: str = Field(default="", alias="POSTGRES_SCHEMA")

    qdrant_url: str | None = Field(default=None, alias="QDRANT_URL")
    qdrant_api_key: SecretStr | None = Field(default=None, alias="QDRANT_API_KEY")
    qdrant_path: Path | None = Field(default=None, alias="QDRANT_PATH")
    qdrant_collection: str = Field(default="chunks", alias="QDRANT_COLLECTION")
    qdrant_hnsw_ef_construct: int = Field(default=100, alias="QDRANT_HNSW_EF_CONSTRUCT")
    qdrant_hnsw_m: int = Field(default=16, alias="QDRANT_HNSW_M")

    neo4j_uri: str | None = Field(default=None, alias="NEO4J_URI")
    neo4j_user: str = Field(default="neo4j", alias="NEO4J_USER")
    neo4j_password: SecretStr = Field(default=SecretStr(""), alias="NEO4J_PASSWORD")
    neo4j_database: str | None = Field(default=None, alias="NEO4J_DATABASE")
    graph_path: Path | None = Field(default=None, alias="GRAPH_PATH")

    seed_profile: Literal["auto", "default", "local", "none"] = Field(
        default="auto", alias="UPSTREAM_SEED_PROFILE"
    )
    reindex_schedule: str | None = Field(default=None, alias="REINDEX_SCHEDULE")

    redis_url: str | None = Field(default=None, alias="REDIS_URL")
    # Caches (see adapters/cache_wiring.py): Redis at REDIS_URL, else in-process.
    cache_key_prefix: str = Field(default="", alias="CACHE_KEY_PREFIX")
    redis_timeout_s: float = Field(default=0.5, alias="REDIS_TIMEOUT", gt=0)
    redis_retry_interval_s: float = Field(default=1.0, alias="REDIS_RETRY_INTERVAL", gt=0)
    use_embedding_cache: bool = Field(default=True, alias="USE_EMBEDDING_CACHE")
    embedding_cache_ttl_s: float = Field(default=86_400, alias="EMBEDDING_CACHE_TTL", gt=0)
    embedding_cache_batch: int = Field(default=50, alias="EMBEDDING_CACHE_BATCH", gt=0)
    query_cache_ttl_s: float = Field(default=3600, alias="QUERY_CACHE_TTL", gt=0)
    use_semantic_cache: bool = Field(default=True, alias="USE_SEMANTIC_CACHE")
    semantic_cache_threshold: float = Field(
        default=0.95, alias="SEMANTIC_CACHE_THRESHOLD", gt=0, le=1
    )
    cache_memory_max_entries: int = Field(default=50_000, alias="CACHE_MEMORY_MAX_ENTRIES", gt=0)
    use_cache_warming: bool = Field(default=False, alias="USE_CACHE_WARMING")
    cache_warming_entities: int = Field(default=1000, alias="CACHE_WARMING_ENTITIES", gt=0)

    rag_pipeline: str = Field(default="hybrid", alias="RAG_PIPELINE")
    rag_confidence_threshold: int = Field(default=60, alias="RAG_CONFIDENCE_THRESHOLD", ge=0)
    rag_admin_email: str = Field(default="admin@localhost", alias="RAG_ADMIN_EMAIL")
    rag_min_similarity_score: float = Field(default=0.3, alias="RAG_MIN_SIMILARITY_SCORE")
    rag_max_chunks_per_doc: int = Field(default=3, alias="RAG_MAX_CHUNKS_PER_DOC", gt=0)
    rag_chunk_overlap_threshold: float = Field(default=0.9, alias="RAG_CHUNK_OVERLAP_THRESHOLD")
    rag_llm_confidence: bool = Field(default=True, alias="RAG_LLM_CONFIDENCE")
    rag_deep_context_tokens: int = Field(default=8000, alias="RAG_DEEP_CONTEXT_TOKENS", gt=0)
    rag_max_response_tokens: int = Field(default=1024, alias="RAG_MAX_RESPONSE_TOKENS", gt=0)
    rag_max_context_tokens: int = Field(default=3000, alias="RAG_MAX_CONTEXT_TOKENS", gt=0)
    rag_max_history_tokens: int = Field(default=1000, alias="RAG_MAX_HISTORY_TOKENS", ge=0)

    embedding_model_path: Path | None = Field(default=None, alias="EMBEDDING_MODEL_PATH")
    embedding_max_tokens: int = Field(default=256, alias="EMBEDDING_MAX_TOKENS", gt=16)
    embedding_batch_size: int = Field(default=64, alias="EMBEDDING_BATCH_SIZE", gt=0)
    projection_batch_size: int = Field(default=512, alias="PROJECTION_BATCH_SIZE", gt=0)

    # Cross-encoder for /rerank (the CLI's --cross-encoder-path / --cross-encoder win over these)
    cross_encoder_path: str | None = Field(default=None, alias="CROSS_ENCODER_PATH")
    cross_encoder_model: str | None = Field(default=None, alias="CROSS_ENCODER_MODEL")
    cross_encoder_cache_dir: Path | None = Field(default=None, alias="CROSS_ENCODER_CACHE_DIR")

    @field_validator("nats_url", "qdrant_url", "redis_url", "neo4j_uri", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("reindex_schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value:
            from domain.index_tuning import CronSchedule

            CronSchedule.parse(value)  # a bad schedule fails at start-up, with its reason
        return value or None

    @property
    def profile(self) -> str:
        servers = (
            self.nats_url,
            self.qdrant_url,
            self.neo4j_uri,
            self.persistence_module != "eventsourcing.sqlite",
        )
        return "production" if any(servers) else "embedded"

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def event_store_env(self) -> dict[str, str]:
        if self.persistence_module == "eventsourcing.sqlite":
            self.data_dir.mkdir(parents=True, exist_ok=True)
            return {
                "PERSISTENCE_MODULE": "eventsourcing.sqlite",
                "SQLITE_DBNAME": str(self.data_dir / "events.sqlite"),
                "SQLITE_LOCK_TIMEOUT": "10",
            }
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": self.postgres_dbname,
            "POSTGRES_HOST": self.postgres_host,
            "POSTGRES_PORT": str(self.postgres_port),
            "POSTGRES_USER": self.postgres_user,
            "POSTGRES_PASSWORD": self.postgres_password.get_secret_value(),
        }
        if self.postgres_schema:
            env["POSTGRES_SCHEMA"] = self.postgres_schema
        return env
