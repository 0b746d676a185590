"""Model configuration through the HTTP API: commands over an in-process bus (JSON on the wire,
errors as dicts, as NATS carries them), the DuckDB read model, and discovery against a scripted
HTTP server running in its own process on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from adapters.duckdb_model_configs import DuckDBModelConfigs
from adapters.model_discovery import DiscoverySettings, ModelDiscovery
from api.errors import install_error_handlers
from api.routes import models as models_routes
from bus.intake import handle
from bus.model_config_subjects import (
    CMD_MODEL_CONFIG_CREATE,
    CMD_MODEL_CONFIG_DELETE,
    CMD_MODEL_CONFIG_SEED,
    CMD_MODEL_CONFIG_UPDATE,
)
from commands.application import UpstreamApplication
from commands.model_config import (
    CreateModelConfig,
    DeleteModelConfig,
    SeedModelConfigs,
    UpdateModelConfig,
)
from commands.models import Command, CommandResult
from domain.errors import NotCaughtUp, error_from_dict
from domain.model_config import SEED_CONFLICT_MESSAGE
from projections.model_configs import ModelConfigsProjection
from projections.rebuild import catch_up

pytestmark = pytest.mark.integration

SEED_COUNT = 19
USAGE_TYPES = [
    "chat_deep",
    "chat_semantic",
    "chat_text",
    "chat_graph",
    "chat_title",
    "embedding",
    "inference",
    "kg_edge_creation",
]


ConfigApp = UpstreamApplication  # it inherits ModelConfigCommands


class InProcessBus:
    """The command bus without NATS: the command crosses as JSON, refusals come back as dicts
    and are rebuilt into their error, exactly as `bus.command_bus.CommandBus` does."""

    def __init__(self, app: ConfigApp) -> None:
        self.routes: dict[str, tuple[type[Command], Any]] = {
            CMD_MODEL_CONFIG_CREATE: (CreateModelConfig, app.create_model_config),
            CMD_MODEL_CONFIG_UPDATE: (UpdateModelConfig, app.update_model_config),
            CMD_MODEL_CONFIG_DELETE: (DeleteModelConfig, app.delete_model_config),
            CMD_MODEL_CONFIG_SEED: (SeedModelConfigs, app.seed_model_configs),
        }
        self.sent: list[str] = []

    async def send(self, subject: str, command: Command) -> CommandResult:
        self.sent.append(subject)
        model, method = self.routes[subject]
        wire = json.loads(json.dumps(command.model_dump(mode="json")))
        reply = (await handle(method, model.model_validate(wire))).as_dict()
        result = CommandResult.model_validate(json.loads(json.dumps(reply)))
        if not result.accepted and result.error is not None:
            raise error_from_dict(result.error)
        return result


@dataclass
class FakeContainer:
    app: ConfigApp
    model_configs: DuckDBModelConfigs
    projection: ModelConfigsProjection
    model_discovery: ModelDiscovery
    command_bus: InProcessBus = field(init=False)

    def __post_init__(self) -> None:
        self.command_bus = InProcessBus(self.app)

    async def wait_for(self, position: int, timeout_s: float | None = None) -> None:
        await asyncio.to_thread(catch_up, self.projection, self.app)
        if self.projection.position() < position:
            raise NotCaughtUp(f"model_configs has not reached position {position}")


# -- a scripted HTTP server, in its own process -------------------------------------------
SERVER = r"""
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

script_path, log_path = sys.argv[1], sys.argv[2]

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log_path, "a") as log:
            log.write(json.dumps({"path": self.path, "headers": dict(self.headers)}) + "\n")
        with open(script_path) as f:
            script = json.load(f)
        step = script.get(self.path, {"status": 404, "body": {"error": "no such route"}})
        time.sleep(step.get("delay", 0))
        data = (step["raw"] if "raw" in step else json.dumps(step.get("body"))).encode()
        self.send_response(step.get("status", 200))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
"""


class ScriptedServer:
    def __init__(self, directory: Path) -> None:
        self.script_path = directory / "script.json"
        self.log_path = directory / "requests.jsonl"
        self.script_path.write_text("{}")
        self.log_path.write_text("")
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(self.script_path), str(self.log_path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.process.stdout.readline())}"

    def script(self, path: str, **step: Any) -> None:
        script = json.loads(self.script_path.read_text())
        script[path] = step
        self.script_path.write_text(json.dumps(script))

    def requests(self, path: str) -> list[dict[str, Any]]:
        lines = self.log_path.read_text().splitlines()
        return [r for r in map(json.loads, lines) if r["path"] == path]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture
def scripted(tmp_path: Path) -> Iterator[ScriptedServer]:
    directory = tmp_path / "scripted"
    directory.mkdir()
    server = ScriptedServer(directory)
    yield server
    server.stop()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


SECRET_KEY = "sk-or-test-0123456789-secret"


@pytest.fixture
def service(tmp_path, scripted, clock, monkeypatch):
    app = ConfigApp(
        env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "ev.db")}
    )
    store = DuckDBModelConfigs(tmp_path / "query" / "model_configs.duckdb")
    projection = ModelConfigsProjection(store)
    projection.start()
    settings = DiscoverySettings(
        OPENROUTER_BASE_URL=f"{scripted.url}/api/v1",  # type: ignore[call-arg]
        OPENROUTER_API_KEY=SECRET_KEY,
        OLLAMA_BASE_URL=scripted.url,
        MODEL_DISCOVERY_TIMEOUT=0.5,
    )
    container = FakeContainer(app, store, projection, ModelDiscovery(settings, clock=clock))
    web = FastAPI()
    install_error_handlers(web)
    web.include_router(models_routes.router)
    web.state.container = container
    with TestClient(web) as client:
        client.container = container  # type: ignore[attr-defined]
        yield client
    store.close()
    app.close()


def _config(**fields: Any) -> dict[str, Any]:
    return {
        "usage_type": "chat_deep",
        "priority": 1,
        "model_id": "qwen/qwen3-4b:free",
        "model_name": "Qwen3 4B",
        "provider": "openrouter",
        **fields,
    }


def _create(service: TestClient, **fields: Any) -> dict[str, Any]:
    reply = service.post("/api/v1/models/config?wait=true", json=_config(**fields))
    assert reply.status_code == 201, reply.text
    body: dict[str, Any] = reply.json()
    return body


# -- seeding ------------------------------------------------------------------------------
@pytest.mark.spec("CFG-04.1")
def test_seed_on_an_empty_table_creates_the_defaults_then_a_second_seed_is_409(service):
    reply = service.post("/api/v1/models/config/seed?wait=true")
    assert reply.status_code == 200, reply.text
    assert reply.json()["count"] == SEED_COUNT and reply.json()["waited"]
    listed = service.get("/api/v1/models/config").json()
    assert listed["count"] == SEED_COUNT
    assert {c["usage_type"] for c in listed["configs"]} == set(USAGE_TYPES)
    assert service.container.command_bus.sent == ["cmd.model_config.seed"]

    again = service.post("/api/v1/models/config/seed", json={})
    assert again.status_code == 409
    assert again.json()["message"] == SEED_CONFLICT_MESSAGE
    assert again.json()["message"] == "Configurations already exist. Use reset endpoint to replace."
    assert service.get("/api/v1/models/config").json()["count"] == SEED_COUNT


@pytest.mark.spec("CFG-04.2")
def test_seed_with_force_replaces_every_configuration(service):
    service.post("/api/v1/models/config/seed?wait=true")
    mine = _create(service, priority=5)["id"]
    old = {c["id"] for c in service.get("/api/v1/models/config").json()["configs"]}

    reply = service.post("/api/v1/models/config/seed?wait=true", json={"force": True})

    assert reply.status_code == 200, reply.text
    assert reply.json()["count"] == SEED_COUNT and reply.json()["replaced"] == SEED_COUNT + 1
    configs = service.get("/api/v1/models/config").json()["configs"]
    assert len(configs) == SEED_COUNT and not {c["id"] for c in configs} & old
    assert service.get(f"/api/v1/models/config/{mine}").status_code == 404
    history = service.get(f"/api/v1/models/config/{mine}/history").json()["events"]
    assert history[-1]["event_type"] == "ModelConfigDeleted"


@pytest.mark.spec("CFG-04.3")
def test_the_seeded_configurations_are_the_spec_defaults(service):
    service.post("/api/v1/models/config/seed?wait=true")
    configs = service.get("/api/v1/models/config").json()["configs"]
    table = {(c["usage_type"], c["priority"]): c for c in configs}
    assert table[("chat_deep", 1)]["model_id"] == "deepseek/deepseek-r1-0528:free"
    assert table[("chat_deep", 1)]["parameters"]["temperature"] == 0.6
    assert table[("chat_semantic", 1)]["parameters"]["temperature"] == 0.2
    assert table[("chat_text", 1)]["parameters"]["temperature"] == 0.3
    assert table[("chat_graph", 1)]["model_id"] == "mistralai/devstral-2512:free"
    assert table[("chat_graph", 1)]["parameters"]["temperature"] == 0.1
    assert table[("chat_title", 3)]["model_id"] == "qwen/qwen3-4b:free"
    assert (table[("embedding", 1)]["model_id"], table[("embedding", 1)]["provider"]) == (
        "nomic-embed-text",
        "ollama",
    )
    assert (table[("inference", 1)]["model_id"], table[("inference", 1)]["provider"]) == (
        "llama3.1:8b",
        "ollama",
    )
    assert [table[("kg_edge_creation", p)]["model_id"] for p in (1, 2)] == [
        "mistralai/devstral-2512:free",
        "google/gemini-2.0-flash-exp:free",
    ]
    assert ("kg_edge_creation", 3) not in table
    assert all(c["enabled"] for c in configs)


def test_the_local_profile_seeds_ollama_then_extractive(service):
    reply = service.post("/api/v1/models/config/seed?wait=true", json={"profile": "local"})
    assert reply.status_code == 200
    chain = service.get("/api/v1/models/config/chain?usage_type=chat_text").json()["chain"]
    assert [c["provider"] for c in chain] == ["ollama", "extractive"]
    bad = service.post("/api/v1/models/config/seed", json={"profile": "cloudy", "force": True})
    assert bad.status_code == 400 and bad.json()["error"] == "unknown_seed_profile"


# -- validation -------------------------------------------------------------------------------
@pytest.mark.spec("CFG-01.2")
def test_an_invalid_usage_type_is_400_naming_the_valid_ones(service):
    for reply in (
        service.post("/api/v1/models/config", json=_config(usage_type="chat_fast")),
        service.get("/api/v1/models/config?usage_type=chat_fast"),
        service.get("/api/v1/models/config/history?usage_type=chat_fast"),
        service.get("/api/v1/models/config/chain?usage_type=chat_fast"),
    ):
        assert reply.status_code == 400, reply.text
        body = reply.json()
        assert body["error"] == "unknown_usage_type" and "chat_fast" in body["message"]
        assert all(u in body["message"] for u in USAGE_TYPES)
    for usage in USAGE_TYPES:
        assert _create(service, usage_type=usage)["config"]["usage_type"] == usage


@pytest.mark.spec("CFG-01.3")
def test_an_unknown_provider_is_400_and_every_known_one_is_accepted(service):
    reply = service.post("/api/v1/models/config", json=_config(provider="anthropic"))
    assert reply.status_code == 400
    assert reply.json()["error"] == "unknown_provider"
    providers = ["ollama", "openrouter", "groq", "openai_compatible", "extractive"]
    assert all(p in reply.json()["message"] for p in providers)
    for priority, provider in enumerate(providers, start=1):
        created = _create(service, priority=priority, provider=provider)
        assert created["config"]["provider"] == provider


def test_bad_parameters_are_400_and_a_malformed_body_is_422(service):
    reply = service.post("/api/v1/models/config", json=_config(parameters={"temperature": 3}))
    assert reply.status_code == 400 and "temperature" in reply.json()["message"]
    missing = service.post("/api/v1/models/config", json={"usage_type": "chat_deep"})
    assert missing.status_code == 422


# -- CRUD -------------------------------------------------------------------------------------
@pytest.mark.spec("CFG-01.1")
def test_a_duplicate_usage_type_and_priority_is_409(service):
    first = _create(service)
    reply = service.post("/api/v1/models/config", json=_config(model_id="other"))
    assert reply.status_code == 409
    assert reply.json()["error"] == "model_config_slot_taken"
    assert first["id"] in reply.json()["message"]
    second = _create(service, priority=2)
    moved = service.patch(f"/api/v1/models/config/{second['id']}", json={"priority": 1})
    assert moved.status_code == 409
    assert service.get("/api/v1/models/config").json()["count"] == 2


@pytest.mark.spec("CFG-07.1")
def test_parameters_default_when_absent_and_merge_on_update(service):
    created = _create(service, parameters={"max_tokens": 1024})
    assert created["config"]["parameters"] == {
        "streaming": True,
        "reasoning_mode": False,
        "max_tokens": 1024,
        "temperature": 0.3,
    }
    reply = service.patch(
        f"/api/v1/models/config/{created['id']}?wait=true",
        json={"parameters": {"reasoning_mode": True}},
    )
    assert reply.json()["config"]["parameters"] == {
        "streaming": True,
        "reasoning_mode": True,
        "max_tokens": 1024,
        "temperature": 0.3,
    }


def test_create_read_update_delete_with_positions_and_read_your_writes(service):
    created = _create(service)
    assert created["waited"] and created["position"] > 0 and created["changed"]
    config_id = created["id"]
    assert created["config"]["id"] == config_id and created["config"]["created_at"]
    assert service.get(f"/api/v1/models/config/{config_id}").json() == created["config"]

    no_wait = service.put(f"/api/v1/models/config/{config_id}", json={"model_name": "Renamed"})
    assert no_wait.status_code == 200 and not no_wait.json()["waited"]
    assert no_wait.json()["config"] is None and no_wait.json()["position"] > created["position"]
    # the read model has not applied it yet: nothing waited for it
    assert service.get(f"/api/v1/models/config/{config_id}").json()["model_name"] == "Qwen3 4B"
    waited = service.put(f"/api/v1/models/config/{config_id}?wait=true", json={"enabled": False})
    config = waited.json()["config"]
    assert (config["model_name"], config["enabled"]) == ("Renamed", False)
    assert config["updated_at"] >= config["created_at"]

    unchanged = service.patch(f"/api/v1/models/config/{config_id}", json={"enabled": False})
    assert unchanged.status_code == 200 and not unchanged.json()["changed"]

    deleted = service.delete(f"/api/v1/models/config/{config_id}?wait=true")
    assert deleted.status_code == 200 and deleted.json()["deleted"] is True
    assert service.get(f"/api/v1/models/config/{config_id}").status_code == 404
    assert service.get("/api/v1/models/config").json() == {"configs": [], "count": 0}


def test_unknown_ids_are_404_with_a_hint(service):
    unknown = "00000000-0000-4000-8000-000000000000"
    for reply in (
        service.get(f"/api/v1/models/config/{unknown}"),
        service.patch(f"/api/v1/models/config/{unknown}", json={"enabled": True}),
        service.delete(f"/api/v1/models/config/{unknown}"),
        service.get(f"/api/v1/models/config/{unknown}/history"),
        service.delete("/api/v1/models/config/not-a-uuid"),
    ):
        assert reply.status_code == 404, reply.text
        assert reply.json()["error"] == "model_config_not_found" and reply.json()["hint"]


def test_list_filters_by_usage_type_and_enabled(service):
    service.post("/api/v1/models/config/seed?wait=true")
    kg = service.get("/api/v1/models/config?usage_type=kg_edge_creation").json()["configs"]
    assert [c["priority"] for c in kg] == [1, 2]
    service.patch(f"/api/v1/models/config/{kg[0]['id']}?wait=true", json={"enabled": False})
    disabled = service.get("/api/v1/models/config?enabled=false").json()["configs"]
    assert [c["id"] for c in disabled] == [kg[0]["id"]]
    assert service.get("/api/v1/models/config?enabled=true").json()["count"] == SEED_COUNT - 1


# -- selection --------------------------------------------------------------------------------
@pytest.mark.spec("CFG-05.1", "CFG-06.1")
def test_active_model_and_chain_come_from_enabled_configs_by_priority(service):
    second = _create(service, priority=2, model_id="b")
    first = _create(service, priority=1, model_id="a")
    _create(service, priority=3, model_id="c")
    active = service.get("/api/v1/models/config/active?usage_type=chat_deep")
    assert active.status_code == 200 and active.json()["id"] == first["id"]
    chain = service.get("/api/v1/models/config/chain?usage_type=chat_deep").json()["chain"]
    assert [(c["priority"], c["model_id"]) for c in chain] == [(1, "a"), (2, "b"), (3, "c")]

    service.patch(f"/api/v1/models/config/{first['id']}?wait=true", json={"enabled": False})
    active = service.get("/api/v1/models/config/active?usage_type=chat_deep").json()
    assert active["id"] == second["id"] and active["priority"] == 2
    chain = service.get("/api/v1/models/config/chain?usage_type=chat_deep").json()["chain"]
    assert [c["model_id"] for c in chain] == ["b", "c"]


@pytest.mark.spec("CFG-05.2", "CFG-10.2")
def test_no_configuration_is_503_with_configuration_instructions(service):
    for route in ("active", "chain"):
        reply = service.get(f"/api/v1/models/config/{route}?usage_type=chat_graph")
        assert reply.status_code == 503
        body = reply.json()
        assert body["error"] == "No models configured"
        assert body["usage_type"] == "chat_graph"
        assert body["action"] == "Configure models via frontend"


@pytest.mark.spec("CFG-05.3")
def test_all_configs_disabled_is_503_with_its_own_body(service):
    for priority in (1, 2):
        config_id = _create(service, usage_type="chat_semantic", priority=priority)["id"]
        service.patch(f"/api/v1/models/config/{config_id}?wait=true", json={"enabled": False})
    reply = service.get("/api/v1/models/config/active?usage_type=chat_semantic")
    assert reply.status_code == 503
    body = reply.json()
    assert (body["error"], body["usage_type"], body["action"]) == (
        "All models disabled",
        "chat_semantic",
        "Enable at least one model via frontend",
    )


# -- history ----------------------------------------------------------------------------------
def test_history_says_who_when_why_and_what_changed(service):
    created = service.post(
        "/api/v1/models/config?wait=true",
        json=_config(reason="start with qwen"),
        headers={"X-Actor": "ana"},
    ).json()
    config_id = created["id"]
    service.patch(
        f"/api/v1/models/config/{config_id}?wait=true",
        json={"enabled": False, "reason": "rate limited"},
        headers={"X-Actor": "bo"},
    )
    service.delete(f"/api/v1/models/config/{config_id}?wait=true&reason=retired")

    events = service.get(f"/api/v1/models/config/{config_id}/history").json()["events"]
    assert [(e["event_type"], e["actor"], e["reason"]) for e in events] == [
        ("ModelConfigCreated", "ana", "start with qwen"),
        ("ModelConfigUpdated", "bo", "rate limited"),
        ("ModelConfigDeleted", "api", "retired"),
    ]
    assert events[1]["changes"] == {"enabled": [True, False]}
    assert all(e["occurred_at"] and e["position"] for e in events)
    assert events[0]["position"] == created["position"]

    usage = service.get("/api/v1/models/config/history?usage_type=chat_deep").json()
    assert [e["config_id"] for e in usage["events"]] == [config_id] * 3
    assert service.get("/api/v1/models/config/history?usage_type=chat_text").json()["events"] == []


# -- rebuild ----------------------------------------------------------------------------------
def test_replaying_the_events_into_a_fresh_duckdb_gives_an_identical_table(service, tmp_path):
    service.post("/api/v1/models/config/seed?wait=true")
    configs = service.get("/api/v1/models/config").json()["configs"]
    service.patch(f"/api/v1/models/config/{configs[0]['id']}", json={"priority": 7})
    service.delete(f"/api/v1/models/config/{configs[1]['id']}")
    service.post("/api/v1/models/config/seed", json={"force": True})
    extra = _create(service, usage_type="inference", priority=2, model_id="qwen2.5:7b")
    service.patch(f"/api/v1/models/config/{extra['id']}?wait=true", json={"enabled": False})
    container = service.container
    live = container.model_configs.dump()
    live_history = container.model_configs.history_for_usage()

    fresh = DuckDBModelConfigs(tmp_path / "another-process" / "model_configs.duckdb")
    projection = ModelConfigsProjection(fresh)
    projection.start()
    catch_up(projection, container.app, batch=5)
    assert fresh.dump() == live and len(live) == SEED_COUNT + 1
    assert fresh.history_for_usage() == live_history
    assert projection.position() == container.app.max_position()
    fresh.close()


# -- discovery: OpenRouter --------------------------------------------------------------------
OPENROUTER_MODELS = {
    "data": [
        {
            "id": "google/gemini-2.0-flash-exp:free",
            "name": "Google: Gemini 2.0 Flash Experimental (free)",
            "description": "Fast Gemini.",
            "context_length": 1048576,
            "pricing": {"prompt": "0", "completion": "0"},
            "supported_parameters": ["temperature", "max_tokens", "tools"],
        },
        {
            "id": "deepseek/deepseek-r1-0528:free",
            "name": "DeepSeek: R1 0528 (free)",
            "description": "Reasons.",
            "context_length": 163840,
            "pricing": {"prompt": "0", "completion": "0", "request": "0"},
            "supported_parameters": ["reasoning", "include_reasoning", "temperature"],
        },
        {
            "id": "openai/gpt-4o",
            "name": "OpenAI: GPT-4o",
            "context_length": 128000,
            "pricing": {"prompt": "0.0000025", "completion": "0.00001"},
        },
        {
            "id": "half/free",
            "name": "Prompt free, completion paid",
            "pricing": {"prompt": "0", "completion": "0.000001"},
        },
    ]
}


@pytest.mark.spec("CFG-02.1", "CFG-02.3")
def test_free_models_are_fetched_with_the_bearer_key_filtered_and_described(service, scripted):
    scripted.script("/api/v1/models", body=OPENROUTER_MODELS)

    reply = service.get("/api/v1/models/openrouter/free")

    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["cached"] is False and body["count"] == 2
    calls = scripted.requests("/api/v1/models")
    assert len(calls) == 1
    headers = {k.lower(): v for k, v in calls[0]["headers"].items()}
    assert headers["authorization"] == f"Bearer {SECRET_KEY}"
    assert body["models"] == [
        {
            "id": "google/gemini-2.0-flash-exp:free",
            "name": "Google: Gemini 2.0 Flash Experimental (free)",
            "description": "Fast Gemini.",
            "context_length": 1048576,
            "supports_streaming": True,
            "supports_reasoning": False,
        },
        {
            "id": "deepseek/deepseek-r1-0528:free",
            "name": "DeepSeek: R1 0528 (free)",
            "description": "Reasons.",
            "context_length": 163840,
            "supports_streaming": True,
            "supports_reasoning": True,
        },
    ]


@pytest.mark.spec("CFG-02.1")
def test_the_free_model_list_is_cached_for_one_hour(service, scripted, clock):
    scripted.script("/api/v1/models", body=OPENROUTER_MODELS)
    first = service.get("/api/v1/models/openrouter/free").json()
    clock.now += 3599
    again = service.get("/api/v1/models/openrouter/free").json()
    assert len(scripted.requests("/api/v1/models")) == 1
    assert again["models"] == first["models"] and again["fetched_at"] == first["fetched_at"]
    clock.now += 2
    service.get("/api/v1/models/openrouter/free")
    assert len(scripted.requests("/api/v1/models")) == 2


@pytest.mark.spec("CFG-02.2")
@pytest.mark.parametrize(
    "failure",
    [
        {"status": 503, "body": {"error": "overloaded"}},
        {"status": 429, "body": {"error": "rate limited"}},
        {"status": 200, "raw": "{not json"},
        {"status": 200, "body": OPENROUTER_MODELS, "delay": 2},
    ],
    ids=["503", "429", "malformed", "timeout"],
)
def test_when_openrouter_fails_the_cached_list_is_served_with_cached_true(
    service, scripted, clock, failure
):
    scripted.script("/api/v1/models", body=OPENROUTER_MODELS)
    fresh = service.get("/api/v1/models/openrouter/free").json()
    clock.now += 3601  # the cache is stale: OpenRouter is asked again, and fails
    scripted.script("/api/v1/models", **failure)

    reply = service.get("/api/v1/models/openrouter/free")

    assert reply.status_code == 200
    assert reply.json()["cached"] is True and reply.json()["models"] == fresh["models"]
    assert len(scripted.requests("/api/v1/models")) == 2


@pytest.mark.spec("CFG-02.2")
@pytest.mark.parametrize(
    "failure",
    [
        {"status": 500, "body": {"error": "boom"}},
        {"status": 401, "body": {"error": "bad key"}},
        {"status": 200, "body": {"unexpected": True}},
        {"status": 200, "body": OPENROUTER_MODELS, "delay": 2},
    ],
    ids=["500", "401", "no-data", "timeout"],
)
def test_without_a_cache_an_openrouter_failure_is_503_and_never_leaks_the_key(
    service, scripted, failure, caplog
):
    scripted.script("/api/v1/models", **failure)

    reply = service.get("/api/v1/models/openrouter/free")

    assert reply.status_code == 503
    body = reply.json()
    assert body["error"] == "openrouter_unavailable" and body["message"] and body["hint"]
    assert SECRET_KEY not in reply.text and SECRET_KEY not in caplog.text


# -- discovery: Ollama ------------------------------------------------------------------------
OLLAMA_TAGS = {
    "models": [
        {
            "name": "llama3.1:8b",
            "model": "llama3.1:8b",
            "modified_at": "2026-10-01T12:00:00.000000+02:00",
            "size": 4920753328,
            "digest": "46e0c10c039e",
            "details": {
                "format": "gguf",
                "family": "llama",
                "families": ["llama"],
                "parameter_size": "8.0B",
                "quantization_level": "Q4_K_M",
            },
        },
        {
            "name": "nomic-embed-text:latest",
            "modified_at": "2026-09-01T08:00:00Z",
            "size": 274302450,
            "details": {
                "family": "nomic-bert",
                "families": ["nomic-bert"],
                "parameter_size": "137M",
                "quantization_level": "F16",
            },
        },
    ]
}


@pytest.mark.spec("CFG-03.1")
def test_ollama_models_are_listed_with_size_quantization_and_capabilities(service, scripted):
    scripted.script("/api/tags", body=OLLAMA_TAGS)

    reply = service.get("/api/v1/models/ollama")

    assert reply.status_code == 200, reply.text
    assert len(scripted.requests("/api/tags")) == 1
    models = reply.json()["models"]
    assert [
        (m["name"], m["size"], m["quantization"], m["modified_at"], m["capabilities"])
        for m in models
    ] == [
        ("llama3.1:8b", 4920753328, "Q4_K_M", "2026-10-01T12:00:00.000000+02:00", ["completion"]),
        ("nomic-embed-text:latest", 274302450, "F16", "2026-09-01T08:00:00Z", ["embedding"]),
    ]
    assert models[0]["parameter_size"] == "8.0B" and models[0]["family"] == "llama"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.spec("CFG-03.2")
@pytest.mark.parametrize("failure", ["refused", "500", "timeout", "malformed"])
def test_an_unreachable_ollama_is_503_ollama_is_not_running_with_a_hint(service, scripted, failure):
    discovery = service.container.model_discovery
    if failure == "refused":
        discovery.settings = discovery.settings.model_copy(
            update={"ollama_base_url": f"http://127.0.0.1:{_closed_port()}"}
        )
    elif failure == "500":
        scripted.script("/api/tags", status=500, body={"error": "model runner crashed"})
    elif failure == "timeout":
        scripted.script("/api/tags", body=OLLAMA_TAGS, delay=2)
    else:
        scripted.script("/api/tags", raw="<html>not ollama</html>")

    reply = service.get("/api/v1/models/ollama")

    assert reply.status_code == 503
    body = reply.json()
    assert body["message"] == "Ollama is not running"
    assert "ollama serve" in body["hint"] and "OLLAMA_BASE_URL" in body["hint"]
