"""Model configuration rules on the write side (in-memory event store) and its DuckDB read model."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from adapters.duckdb_model_configs import DuckDBModelConfigs
from commands.application import UpstreamApplication
from commands.model_config import (
    CreateModelConfig,
    DeleteModelConfig,
    SeedModelConfigs,
    UpdateModelConfig,
)
from domain.errors import InvalidCommand, error_from_dict
from domain.model_config import (
    CHAT_USAGE_TYPES,
    SEED_CONFLICT_MESSAGE,
    AllModelsDisabled,
    InvalidModelParameters,
    ModelConfigNotFound,
    ModelConfigRegistry,
    ModelConfigsAlreadyExist,
    ModelParameters,
    NoModelsConfigured,
    PrioritySlotTaken,
    Provider,
    UnknownProvider,
    UnknownSeedProfile,
    UnknownUsageType,
    UsageType,
    seed_profile,
    usage_type_for_chat,
)
from projections.model_configs import ModelConfigsProjection
from projections.rebuild import catch_up, rebuild

pytestmark = pytest.mark.unit

ALL_USAGE_TYPES = [
    "chat_deep",
    "chat_semantic",
    "chat_text",
    "chat_graph",
    "chat_title",
    "embedding",
    "inference",
    "kg_edge_creation",
]
ALL_PROVIDERS = ["ollama", "openrouter", "groq", "openai_compatible", "extractive"]


ConfigApp = UpstreamApplication  # it inherits ModelConfigCommands


@pytest.fixture
def app() -> Iterator[ConfigApp]:
    application = ConfigApp(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
    yield application
    application.close()


@pytest.fixture
def read_model(tmp_path: Path) -> Iterator[tuple[DuckDBModelConfigs, ModelConfigsProjection]]:
    store = DuckDBModelConfigs(tmp_path / "model_configs.duckdb")
    projection = ModelConfigsProjection(store)
    projection.start()
    yield store, projection
    store.close()


def _create(app: ConfigApp, **fields: Any) -> str:
    values: dict[str, Any] = {
        "usage_type": "chat_deep",
        "priority": 1,
        "model_id": "qwen/qwen3-4b:free",
        "provider": "openrouter",
        **fields,
    }
    result = app.create_model_config(CreateModelConfig(**values))
    assert result.accepted and result.changed and result.aggregate_id
    return result.aggregate_id


# -- enumerations -------------------------------------------------------------------------
@pytest.mark.spec("CFG-01.2")
def test_usage_type_must_be_one_of_the_eight_and_an_unknown_one_is_refused(app):
    assert [u.value for u in UsageType] == ALL_USAGE_TYPES
    for usage in ALL_USAGE_TYPES:
        _create(app, usage_type=usage)
    before = app.max_position()

    with pytest.raises(UnknownUsageType) as refused:
        app.create_model_config(
            CreateModelConfig(usage_type="chat_fast", priority=1, model_id="m", provider="ollama")
        )
    assert isinstance(refused.value, InvalidCommand)  # mapped to 400 Bad Request
    for usage in ALL_USAGE_TYPES:
        assert usage in refused.value.message
    assert app.max_position() == before  # nothing recorded


@pytest.mark.spec("CFG-01.3")
def test_provider_must_be_a_known_one_and_is_recorded(app):
    assert sorted(p.value for p in Provider) == sorted(ALL_PROVIDERS)
    ids = [_create(app, provider=p, priority=i) for i, p in enumerate(ALL_PROVIDERS, start=1)]
    recorded = [
        e.payload["provider"] for e in app.read(0, 1000) if e.event_type.endswith("Created")
    ]
    assert recorded == ALL_PROVIDERS and len(ids) == 5

    before = app.max_position()
    with pytest.raises(UnknownProvider) as refused:
        app.create_model_config(
            CreateModelConfig(usage_type="chat_text", priority=1, model_id="m", provider="azure")
        )
    assert "azure" in refused.value.message
    assert all(p in refused.value.message for p in ALL_PROVIDERS)
    assert app.max_position() == before  # nothing recorded


def test_chat_endpoints_map_to_their_usage_types():
    assert [usage_type_for_chat(i) for i in ("deep", "semantic", "text", "graph", "title")] == list(
        CHAT_USAGE_TYPES
    )
    with pytest.raises(UnknownUsageType):
        usage_type_for_chat("fast")


# -- parameters ---------------------------------------------------------------------------
@pytest.mark.spec("CFG-07.1")
def test_parameters_are_optional_with_the_spec_defaults(app):
    assert ModelParameters.validated(None).to_dict() == {
        "streaming": True,
        "reasoning_mode": False,
        "max_tokens": 4096,
        "temperature": 0.3,
    }
    _create(app, parameters={"temperature": 0.9})
    created = app.read(0, 100)[-1]
    assert created.payload["parameters"] == {
        "streaming": True,
        "reasoning_mode": False,
        "max_tokens": 4096,
        "temperature": 0.9,
    }


@pytest.mark.parametrize(
    "parameters",
    [
        {"temperature": 2.5},
        {"temperature": -0.1},
        {"max_tokens": 0},
        {"streaming": "yes"},
        {"top_k": 3},
    ],
)
def test_out_of_range_or_unknown_parameters_are_refused(app, parameters):
    with pytest.raises(InvalidModelParameters):
        _create(app, parameters=parameters)
    assert app.max_position() == 0


# -- the UNIQUE(usage_type, priority) rule, on the write side -----------------------------
@pytest.mark.spec("CFG-01.1")
def test_a_taken_slot_is_refused_before_anything_is_recorded(app):
    first = _create(app)
    before = app.max_position()

    with pytest.raises(PrioritySlotTaken) as refused:
        _create(app, model_id="other")
    assert first in refused.value.message
    assert app.max_position() == before
    _create(app, priority=2)
    _create(app, usage_type="chat_text")  # same priority, another usage type: allowed


def test_moving_into_a_taken_slot_is_refused_and_deleting_frees_the_slot(app):
    first = _create(app)
    second = _create(app, priority=2)

    with pytest.raises(PrioritySlotTaken):
        app.update_model_config(UpdateModelConfig(config_id=second, priority=1))
    app.delete_model_config(DeleteModelConfig(config_id=first, reason="retired"))
    moved = app.update_model_config(UpdateModelConfig(config_id=second, priority=1))
    assert moved.changed
    _create(app, priority=2)  # the slot the move freed


def test_an_update_that_changes_nothing_records_nothing(app):
    config_id = _create(app)
    before = app.max_position()
    again = app.update_model_config(UpdateModelConfig(config_id=config_id, priority=1))
    assert again.accepted and not again.changed and again.position == before


def test_unknown_or_deleted_configs_are_not_found(app):
    config_id = _create(app)
    app.delete_model_config(DeleteModelConfig(config_id=config_id))
    for missing in (config_id, "not-a-uuid", "00000000-0000-4000-8000-000000000000"):
        with pytest.raises(ModelConfigNotFound):
            app.update_model_config(UpdateModelConfig(config_id=missing, enabled=False))
        with pytest.raises(ModelConfigNotFound):
            app.delete_model_config(DeleteModelConfig(config_id=missing))


def test_a_concurrent_claim_of_the_same_slot_conflicts_and_the_loser_is_refused(tmp_path):
    """Two processes on one store: the second decided on a stale registry, its save conflicts,
    it decides again and finds the slot taken."""
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "e.db")}
    winner = ConfigApp(env=env)
    hook: list[Any] = []

    class Racing(ConfigApp):
        def _registry(self, tenant_id: str) -> ModelConfigRegistry:
            registry = super()._registry(tenant_id)
            while hook:
                hook.pop()()  # the other process writes between our read and our save
            return registry

    loser = Racing(env=env)
    _create(loser, priority=9)  # both know the registry now
    hook.append(lambda: _create(winner, model_id="winner"))
    try:
        with pytest.raises(PrioritySlotTaken):
            _create(loser, model_id="loser")
        created = [e.payload["model_id"] for e in loser.read(0, 100) if "Created" in e.event_type]
        assert created.count("winner") == 1 and "loser" not in created
    finally:
        winner.close()
        loser.close()


# -- seeding ------------------------------------------------------------------------------
SPEC_DEFAULTS = {
    "chat_deep": [
        ("deepseek/deepseek-r1-0528:free", 0.6),
        ("mistralai/devstral-2512:free", 0.3),
        ("google/gemini-2.0-flash-exp:free", 0.3),
    ],
    "chat_semantic": [
        ("google/gemini-2.0-flash-exp:free", 0.2),
        ("qwen/qwen3-4b:free", 0.3),
        ("mistralai/mistral-7b-instruct:free", 0.3),
    ],
    "chat_text": [
        ("google/gemini-2.0-flash-exp:free", 0.3),
        ("mistralai/mistral-7b-instruct:free", 0.3),
        ("qwen/qwen3-4b:free", 0.3),
    ],
    "chat_graph": [
        ("mistralai/devstral-2512:free", 0.1),
        ("deepseek/deepseek-r1-0528:free", 0.3),
        ("google/gemini-2.0-flash-exp:free", 0.3),
    ],
    "chat_title": [
        ("google/gemini-2.0-flash-exp:free", 0.2),
        ("mistralai/mistral-7b-instruct:free", 0.3),
        ("qwen/qwen3-4b:free", 0.3),
    ],
    "embedding": [("nomic-embed-text", 0.3)],
    "inference": [("llama3.1:8b", 0.3)],
    "kg_edge_creation": [
        ("mistralai/devstral-2512:free", 0.3),
        ("google/gemini-2.0-flash-exp:free", 0.3),
    ],
}


@pytest.mark.spec("CFG-04.3")
def test_the_default_profile_is_the_spec_list_verbatim():
    specs = seed_profile("default")
    got: dict[str, list[tuple[str, float]]] = {}
    for spec in specs:
        assert spec.priority == len(got.get(spec.usage_type, [])) + 1
        got.setdefault(spec.usage_type, []).append((spec.model_id, spec.parameters["temperature"]))
        expected_provider = (
            "ollama" if spec.usage_type in ("embedding", "inference") else "openrouter"
        )
        assert spec.provider == expected_provider and spec.enabled
    assert got == SPEC_DEFAULTS
    assert len(specs) == 19


def test_the_local_profile_puts_ollama_first_and_extractive_last_for_chat():
    with_ollama = seed_profile("local", "http://127.0.0.1:11434")
    chains = {
        u.value: [(s.provider, s.priority) for s in with_ollama if s.usage_type == u]
        for u in UsageType
    }
    for usage in CHAT_USAGE_TYPES:
        assert chains[usage] == [("ollama", 1), ("extractive", 2)]
    assert chains["embedding"] == [("ollama", 1)]
    assert [s.model_id for s in with_ollama if s.usage_type == "embedding"] == ["nomic-embed-text"]

    offline = seed_profile("local", None)
    assert {s.provider for s in offline} == {"extractive"}
    assert sorted({s.usage_type for s in offline}) == sorted(u.value for u in CHAT_USAGE_TYPES)
    with pytest.raises(UnknownSeedProfile):
        seed_profile("cloudy")


@pytest.mark.spec("CFG-04.1")
def test_seeding_an_empty_set_creates_every_default_and_a_second_seed_is_refused(app):
    result = app.seed_model_configs(SeedModelConfigs())
    events = app.read(0, 1000)
    created = [e for e in events if e.event_type == "ModelConfigCreated"]
    seeded = [e for e in events if e.event_type == "ModelConfigsSeeded"]
    assert result.accepted and len(created) == 19
    assert {e.payload["usage_type"] for e in created} == set(ALL_USAGE_TYPES)
    assert seeded[0].payload["profile"] == "default" and seeded[0].payload["count"] == 19
    assert result.position == events[-1].position

    with pytest.raises(ModelConfigsAlreadyExist) as refused:
        app.seed_model_configs(SeedModelConfigs())
    assert refused.value.message == SEED_CONFLICT_MESSAGE
    assert SEED_CONFLICT_MESSAGE == "Configurations already exist. Use reset endpoint to replace."
    assert app.max_position() == result.position
    # it crosses the bus as a dict and comes back as the same error
    assert isinstance(error_from_dict(refused.value.to_dict()), ModelConfigsAlreadyExist)


@pytest.mark.spec("CFG-04.2")
def test_seeding_with_force_deletes_every_config_and_seeds_again(app):
    app.seed_model_configs(SeedModelConfigs())
    mine = _create(app, priority=7, actor="ana")
    before = {e.aggregate_id for e in app.read(0, 1000) if e.event_type == "ModelConfigCreated"}
    start = app.max_position()

    result = app.seed_model_configs(SeedModelConfigs(force=True, actor="ops", reason="bad edits"))

    assert set(result.deleted) == before and mine in result.deleted
    later = app.read(start, 1000)
    resets = [e for e in later if e.event_type == "ModelConfigsReset"]
    assert resets and resets[-1].payload["count"] == 20 and resets[-1].payload["actor"] == "ops"
    deleted = [e for e in later if e.event_type == "ModelConfigDeleted"]
    assert {e.aggregate_id for e in deleted} == before
    new = [e for e in later if e.event_type == "ModelConfigCreated"]
    assert len(new) == 19 and not {e.aggregate_id for e in new} & before
    # the deletions are stored before the creations: a slot is free before it is taken again
    assert max(e.position for e in deleted) < min(e.position for e in new)


def test_events_carry_who_and_why(app):
    config_id = _create(app, actor="ana", reason="try qwen")
    app.update_model_config(
        UpdateModelConfig(config_id=config_id, enabled=False, actor="bo", reason="rate limits")
    )
    app.delete_model_config(DeleteModelConfig(config_id=config_id, actor="cy", reason="retired"))
    events = [e for e in app.read(0, 100) if e.aggregate == "model_config"]
    assert [(e.event_type, e.payload["actor"], e.payload["reason"]) for e in events] == [
        ("ModelConfigCreated", "ana", "try qwen"),
        ("ModelConfigUpdated", "bo", "rate limits"),
        ("ModelConfigDeleted", "cy", "retired"),
    ]
    assert events[1].payload["changes"] == {"enabled": [True, False]}
    assert events[1].subject == "events.model_config.ModelConfigUpdated"


# -- the read model -----------------------------------------------------------------------
SPEC_COLUMNS = [
    ("id", "VARCHAR", "NO", "uuid()"),
    ("usage_type", "VARCHAR", "NO", None),
    ("priority", "INTEGER", "NO", None),
    ("model_id", "VARCHAR", "NO", None),
    ("model_name", "VARCHAR", "NO", None),
    ("provider", "VARCHAR", "NO", None),
    ("parameters", "JSON", "YES", None),
    ("enabled", "BOOLEAN", "NO", "true"),
    ("created_at", "TIMESTAMP", "YES", "CURRENT_TIMESTAMP"),
    ("updated_at", "TIMESTAMP", "YES", "CURRENT_TIMESTAMP"),
]


@pytest.mark.spec("CFG-01.1")
def test_the_read_model_table_has_the_spec_schema_and_unique_slot(tmp_path):
    path = tmp_path / "m.duckdb"
    store = DuckDBModelConfigs(path)
    store.ensure()
    store.close()
    conn = duckdb.connect(str(path))
    columns = conn.execute(
        "SELECT column_name, data_type, is_nullable, column_default "
        "FROM information_schema.columns WHERE table_name = 'model_configs' "
        "ORDER BY ordinal_position"
    ).fetchall()
    assert [(c, t, n) for c, t, n, _ in columns] == [(c, t, n) for c, t, n, _ in SPEC_COLUMNS]
    defaults = {c: (d or "").lower() for c, _, _, d in columns}
    assert "uuid()" in defaults["id"] and defaults["enabled"] == "true"
    assert "current_timestamp" in defaults["created_at"]
    constraints = conn.execute(
        "SELECT constraint_type, constraint_column_names FROM duckdb_constraints() "
        "WHERE table_name = 'model_configs' AND constraint_type IN ('UNIQUE', 'PRIMARY KEY')"
    ).fetchall()
    assert ("UNIQUE", ["usage_type", "priority"]) in constraints
    assert ("PRIMARY KEY", ["id"]) in constraints
    insert = (
        "INSERT INTO model_configs (usage_type, priority, model_id, model_name, provider) "
        "VALUES ('chat_deep', 1, 'm', 'M', 'ollama')"
    )
    conn.execute(insert)
    with pytest.raises(duckdb.ConstraintException):
        conn.execute(insert)
    conn.close()


def test_the_projection_writes_rows_history_and_checkpoint_together(app, read_model):
    store, projection = read_model
    config_id = _create(app, parameters={"temperature": 0.5}, actor="ana", reason="why not")
    catch_up(projection, app)

    row = store.get(config_id)
    assert row is not None
    assert (row["usage_type"], row["priority"], row["model_id"], row["provider"]) == (
        "chat_deep",
        1,
        "qwen/qwen3-4b:free",
        "openrouter",
    )
    assert row["parameters"]["temperature"] == 0.5 and row["enabled"] is True
    assert store.checkpoint("model_configs") == app.max_position() == projection.position()
    assert [h["event_type"] for h in store.history(config_id)] == ["ModelConfigCreated"]

    # already applied positions are skipped: at-least-once delivery, exactly-once effect
    projection.process(app.read(0, 100))
    assert store.count() == 1 and len(store.history(config_id)) == 1


def test_a_failed_batch_leaves_neither_rows_nor_checkpoint(app, read_model):
    store, projection = read_model
    _create(app)
    envelopes = app.read(0, 100)
    broken = [*envelopes]
    created = broken[-1]
    broken[-1] = dataclasses.replace(created, payload={"tenant_id": "default"})
    with pytest.raises(KeyError):
        projection.process(broken)
    assert store.count() == 0 and store.checkpoint("model_configs") == 0
    projection.process(envelopes)  # retried, not skipped
    assert store.count() == 1


@pytest.mark.spec("CFG-05.1", "CFG-06.1")
def test_active_model_and_fallback_chain_follow_priority_among_enabled(app, read_model):
    store, projection = read_model
    third = _create(app, priority=3, model_id="c")
    first = _create(app, priority=1, model_id="a")
    second = _create(app, priority=2, model_id="b")
    _create(app, usage_type="chat_text", model_id="other")
    catch_up(projection, app)

    assert [c["model_id"] for c in store.get_fallback_chain("chat_deep")] == ["a", "b", "c"]
    assert store.get_active_model("chat_deep")["id"] == first

    app.update_model_config(UpdateModelConfig(config_id=first, enabled=False))
    catch_up(projection, app)
    chain = store.get_fallback_chain("chat_deep")
    assert [(c["id"], c["priority"]) for c in chain] == [(second, 2), (third, 3)]
    assert all(c["enabled"] for c in chain)
    assert store.get_active_model("chat_deep")["model_id"] == "b"


@pytest.mark.spec("CFG-05.2", "CFG-10.2")
def test_no_configuration_is_a_503_error_and_never_a_hard_coded_model(read_model):
    store, _ = read_model
    with pytest.raises(NoModelsConfigured) as missing:
        store.get_active_model("chat_graph")
    assert missing.value.body()["error"] == "No models configured"
    assert missing.value.body()["usage_type"] == "chat_graph"
    assert missing.value.body()["action"] == "Configure models via frontend"
    # the error survives the bus (code/message/hint) with its usage type
    back = error_from_dict(missing.value.to_dict())
    assert isinstance(back, NoModelsConfigured) and back.usage_type == "chat_graph"


@pytest.mark.spec("CFG-05.3")
def test_all_configs_disabled_is_its_own_503_error(app, read_model):
    store, projection = read_model
    for priority in (1, 2):
        config_id = _create(app, usage_type="chat_title", priority=priority)
        app.update_model_config(UpdateModelConfig(config_id=config_id, enabled=False))
    catch_up(projection, app)
    with pytest.raises(AllModelsDisabled) as disabled:
        store.get_fallback_chain("chat_title")
    assert disabled.value.body() | {} == {
        **disabled.value.body(),
        "error": "All models disabled",
        "usage_type": "chat_title",
        "action": "Enable at least one model via frontend",
    }


@pytest.mark.spec("CFG-11.1")
def test_the_embedding_model_comes_from_configuration(app, read_model):
    store, projection = read_model
    with pytest.raises(NoModelsConfigured) as missing:
        store.get_active_model("embedding")
    assert missing.value.message == "Embedding model not configured"

    app.seed_model_configs(SeedModelConfigs())
    catch_up(projection, app)
    active = store.get_active_model("embedding")
    assert (active["model_id"], active["provider"]) == ("nomic-embed-text", "ollama")
    _id = active["id"]
    app.update_model_config(UpdateModelConfig(config_id=_id, model_id="mxbai-embed-large"))
    catch_up(projection, app)
    assert store.get_active_model("embedding")["model_id"] == "mxbai-embed-large"


@pytest.mark.spec("CFG-10.1")
def test_each_chat_endpoint_reads_the_chain_of_its_usage_type(app, read_model):
    store, projection = read_model
    app.seed_model_configs(SeedModelConfigs())
    catch_up(projection, app)
    for intent, usage in zip(
        ("deep", "semantic", "text", "graph", "title"), CHAT_USAGE_TYPES, strict=True
    ):
        chain = store.get_fallback_chain(usage_type_for_chat(intent))
        assert [c["usage_type"] for c in chain] == [usage.value] * 3
        assert [(c["model_id"], c["parameters"]["temperature"]) for c in chain] == SPEC_DEFAULTS[
            usage.value
        ]


def test_list_filters_and_invalid_filter(app, read_model):
    store, projection = read_model
    app.seed_model_configs(SeedModelConfigs())
    catch_up(projection, app)
    assert len(store.list_configs()) == 19
    assert len(store.list_configs(usage_type="kg_edge_creation")) == 2
    assert store.list_configs(enabled=False) == []
    with pytest.raises(UnknownUsageType):
        store.list_configs(usage_type="chat")


def test_history_keeps_deleted_configs_and_moves_between_usage_types(app, read_model):
    store, projection = read_model
    moved = _create(app, usage_type="chat_text", actor="ana")
    app.update_model_config(UpdateModelConfig(config_id=moved, usage_type="chat_title", actor="bo"))
    gone = _create(app, usage_type="chat_text", model_id="x")
    app.delete_model_config(DeleteModelConfig(config_id=gone, actor="cy", reason="slow"))
    catch_up(projection, app)

    assert store.get(gone) is None
    assert [(h["event_type"], h["actor"], h["reason"]) for h in store.history(gone)] == [
        ("ModelConfigCreated", "api", "created"),
        ("ModelConfigDeleted", "cy", "slow"),
    ]
    text = [(h["config_id"], h["event_type"]) for h in store.history_for_usage("chat_text")]
    assert text == [
        (moved, "ModelConfigCreated"),
        (moved, "ModelConfigUpdated"),
        (gone, "ModelConfigCreated"),
        (gone, "ModelConfigDeleted"),
    ]
    update = store.history(moved)[1]
    assert update["changes"] == {"usage_type": ["chat_text", "chat_title"]}
    assert update["occurred_at"].endswith("Z")


def test_rebuilding_the_read_model_gives_the_same_table(app, read_model, tmp_path):
    store, projection = read_model
    app.seed_model_configs(SeedModelConfigs())
    ids = [c["id"] for c in (catch_up(projection, app) and store.list_configs())]
    app.update_model_config(UpdateModelConfig(config_id=ids[0], enabled=False, priority=9))
    app.delete_model_config(DeleteModelConfig(config_id=ids[1]))
    app.seed_model_configs(SeedModelConfigs(force=True, profile="local", ollama_base_url="x"))
    _create(app, usage_type="inference", priority=2, model_id="extra")
    catch_up(projection, app)
    live = store.dump()
    history = store.history_for_usage()

    rebuild(projection, app)
    assert store.dump() == live and store.history_for_usage() == history

    fresh = DuckDBModelConfigs(tmp_path / "fresh.duckdb")
    fresh_projection = ModelConfigsProjection(fresh)
    fresh_projection.start()
    catch_up(fresh_projection, app, batch=7)
    assert fresh.dump() == live and len(live) == 14
    fresh.close()


def test_other_tenants_do_not_reach_this_read_model(app, read_model):
    store, projection = read_model
    app.seed_model_configs(SeedModelConfigs(tenant_id="acme"))
    _create(app)
    catch_up(projection, app)
    assert store.count() == 1 and projection.position() == app.max_position()
    assert [h["event_type"] for h in store.history_for_usage()] == ["ModelConfigCreated"]


def test_errors_keep_their_type_across_the_bus():
    for error in (
        UnknownUsageType("x"),
        UnknownProvider("x"),
        PrioritySlotTaken("x"),
        ModelConfigNotFound("x"),
        AllModelsDisabled("All models disabled for usage type chat_deep"),
    ):
        back = error_from_dict(error.to_dict())
        assert type(back) is type(error) and back.to_dict() == error.to_dict()
