"""The KG enrichment policy over the whole flow in memory: events in, a model (a fake provider
behind the real gateway) asked, proposals validated, verified and recorded as events, the graph
and `kg` read models built from them, review, history and replay.

The real OpenAI-compatible adapter behind the same gateway is exercised against a scripted HTTP
server and a real llama.cpp server in tests/integration/test_kg_enrichment_service.py and
test_kg_llama_server.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from adapters.duckdb_model_configs import DuckDBModelConfigs
from adapters.graph_memory import InMemoryGraphStore
from adapters.kg_sqlite import SqliteKGStore
from commands.application import UpstreamApplication
from commands.kg import AcceptLineageEdge, ProposeKGEdges, RejectLineageEdge
from commands.model_config import CreateModelConfig, SeedModelConfigs
from commands.models import DeleteFile, IngestFile
from domain.kg.aggregates import EdgeNotReviewable, ProposedEdgeNotFound
from domain.llm import (
    CapabilityUnsupported,
    Completion,
    CompletionRequest,
    MalformedResponse,
    ProviderUnavailable,
    RateLimited,
)
from domain.model_config import NoModelsConfigured
from projections.graph import GraphProjection
from projections.kg import KGProjection
from projections.kg_enrichment import EnrichmentOptions, KGEnrichmentPolicy
from projections.model_configs import ModelConfigsProjection
from projections.rebuild import catch_up, rebuild
from queries.free_tier import FreeTierPolicy
from queries.gateway import Gateway, GatewayConfig
from queries.kg import KGService
from queries.lineage import LineageService

pytestmark = pytest.mark.unit

P = "shop"
LOAD = "etl/load_orders.sql"
LOAD_SQL = "-- nightly load\nINSERT INTO mart.orders\nSELECT id, amount FROM raw.orders;\n"
REPORT = "etl/report.py"
REPORT_PY = '''"""Builds the report from raw.customers (the table name is built at run time)."""


def build(conn, name="customers"):
    rows = conn.execute(f"select * from raw.{name}").fetchall()
    conn.execute("insert into mart.report select * from staging.totals")
    return rows
'''


def answer(*items: dict[str, Any]) -> str:
    return json.dumps({"proposals": list(items)})


def proposal(source: str, target: str, kind: str = "READS", confidence: float = 0.8) -> dict:
    return {
        "source_node": source,
        "target_node": target,
        "relationship_type": kind,
        "confidence": confidence,
        "reasoning": f"{source} {kind} {target}",
    }


LOAD_ANSWER = answer(
    proposal("mart.orders", "raw.orders", confidence=0.95),  # verified
    proposal("raw.orders", "mart.orders", confidence=0.4),  # contradicted (the reverse)
    proposal("mart.orders", "raw.invented", confidence=0.7),  # named nowhere: dropped
    {"source_node": "x", "target_node": "y"},  # not a proposal: dropped
)
REPORT_ANSWER = answer(proposal("build", "raw.customers", confidence=0.6))  # unverified


class FakeProvider:
    """An LLM provider answering from a script per model: text or an exception; the last
    step repeats. It records every request."""

    def __init__(self, name: str = "openai_compatible", **script: list[Any]) -> None:
        self.name = name
        self.script = script
        self.calls: list[tuple[str, CompletionRequest]] = []

    async def complete(self, request: CompletionRequest, model: str) -> Completion:
        self.calls.append((model, request))
        steps = self.script[re.sub(r"[^a-z0-9]", "_", model)]  # kg-model -> kg_model
        step = steps.pop(0) if len(steps) > 1 else steps[0]
        if isinstance(step, BaseException):
            raise step
        return Completion(text=step, model=model, provider=self.name, completion_tokens=5)

    def stream(self, request: CompletionRequest, model: str) -> AsyncIterator[str]:
        raise CapabilityUnsupported("no streaming here")

    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        raise CapabilityUnsupported("no embeddings here")

    async def aclose(self) -> None:
        return None


class World:
    """The write side, the graph/kg/model_configs read models and the policy, in memory."""

    def __init__(self, provider: FakeProvider, **options: Any) -> None:
        self.app = UpstreamApplication(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
        self.graph = InMemoryGraphStore()
        self.kg = SqliteKGStore(":memory:")
        self.configs = DuckDBModelConfigs(":memory:")
        self.projections = [
            GraphProjection(self.graph),
            KGProjection(self.kg),
            ModelConfigsProjection(self.configs),
        ]
        for projection in self.projections:
            projection.start()
        self.provider = provider
        self.gateway = Gateway(
            {provider.name: provider},
            config=GatewayConfig(base_delay=0.0, rate_limit_cooldown=0.0, unavailable_cooldown=0),
            sleep=lambda _s: asyncio.sleep(0),
        )
        self.policy = KGEnrichmentPolicy(
            self.app,
            self.gateway,
            lambda: self.configs.fallback_chain("kg_edge_creation"),
            self.graph,
            self.kg,
            options=EnrichmentOptions(**options),
            free_tier=FreeTierPolicy(None),
            kg_position=self.projections[1].position,
        )
        self.service = KGService(self.kg, self.configs)
        self.lineage = LineageService(self.graph)
        self.seen = 0

    def configure(self, model: str = "kg-model", provider: str = "openai_compatible") -> None:
        self.app.create_model_config(
            CreateModelConfig(
                usage_type="kg_edge_creation", priority=1, model_id=model, provider=provider
            )
        )
        self.catch_up()

    def ingest(self, path: str, content: str) -> None:
        self.app.ingest_file(IngestFile(project_id=P, path=path, content=content))

    def catch_up(self) -> None:
        for projection in self.projections:
            catch_up(projection, self.app)

    async def live(self) -> None:
        """Deliver what was recorded since the last call to the read models and the policy
        (as the relay and the runners do), until nothing new is recorded."""
        while self.seen < self.app.max_position():
            envelopes = self.app.read(self.seen, 10_000)
            self.seen = envelopes[-1].position
            self.catch_up()
            await self.policy.handle(envelopes)
        self.catch_up()

    def llm_edges(self) -> list[Any]:
        return [e for e in self.graph.dump()[1] if e.provenance == "llm"]

    def parser_edges(self) -> list[Any]:
        return [e for e in self.graph.dump()[1] if e.provenance != "llm"]

    def events(self, *types: str) -> list[Any]:
        return [e for e in self.app.read(0, 100_000) if not types or e.event_type in types]


@pytest.fixture
def world() -> World:
    return World(FakeProvider(kg_model=[LOAD_ANSWER]))


async def test_lineage_extracted_triggers_nothing_without_a_kg_model(world, caplog):
    caplog.set_level(logging.INFO, "upstream.kg")
    world.ingest(LOAD, LOAD_SQL)
    await world.live()
    assert world.provider.calls == [] and world.llm_edges() == []
    assert world.events("KGEnrichmentRequested") == []  # nothing recorded, nothing slowed
    assert "KG enrichment is off: KG edge creation model not configured" in caplog.text


@pytest.mark.spec("CFG-12.1")
async def test_a_run_without_a_kg_edge_creation_chain_is_503_not_configured(world):
    with pytest.raises(NoModelsConfigured) as refused:
        world.service.require_chain()
    assert refused.value.message == "KG edge creation model not configured"
    assert refused.value.body()["usage_type"] == "kg_edge_creation"
    world.app.seed_model_configs(SeedModelConfigs(profile="local"))  # offline: extractive only
    world.catch_up()
    with pytest.raises(NoModelsConfigured, match="KG edge creation model not configured"):
        world.service.require_chain()
    world.configure()
    assert [r["model_id"] for r in world.service.require_chain()] == ["kg-model"]


@pytest.mark.spec("CFG-12.1")
@pytest.mark.spec("LLM-11.1")
async def test_the_kg_agent_uses_the_configured_chain_devstral_by_default(caplog):
    caplog.set_level(logging.INFO, "upstream.kg")
    provider = FakeProvider("openrouter", mistralai_devstral_2512_free=[LOAD_ANSWER])
    world = World(provider)
    world.app.seed_model_configs(SeedModelConfigs(profile="default"))
    world.catch_up()
    assert world.configs.fallback_chain("kg_edge_creation")[0]["model_id"] == (
        "mistralai/devstral-2512:free"
    )
    world.ingest(LOAD, LOAD_SQL)
    await world.live()
    (model, request), *_ = provider.calls
    assert model == "mistralai/devstral-2512:free"  # priority 1 of kg_edge_creation
    assert request.response_format is not None  # strict JSON
    assert "model downgraded" not in caplog.text  # a seed default passes the free-tier check
    assert {e.properties["model"] for e in world.llm_edges()} == {model}


@pytest.mark.spec("LLM-11.1")
async def test_a_kg_model_that_is_not_free_is_downgraded_to_the_default_free_model(caplog):
    caplog.set_level(logging.WARNING)
    provider = FakeProvider("openrouter", google_gemini_2_0_flash_exp_free=[LOAD_ANSWER])
    world = World(provider)
    world.configure(model="openai/gpt-4", provider="openrouter")
    world.ingest(LOAD, LOAD_SQL)
    await world.live()
    assert [model for model, _ in provider.calls] == ["google/gemini-2.0-flash-exp:free"]
    assert "model downgraded from_model=openai/gpt-4" in caplog.text
    assert {e.properties["model"] for e in world.llm_edges()} == {
        "google/gemini-2.0-flash-exp:free"
    }


@pytest.mark.spec("LLM-10.2")
@pytest.mark.spec("LLM-11.2")
async def test_valid_proposals_become_events_and_graph_edges_with_provenance(world):
    world.configure()
    world.ingest(LOAD, LOAD_SQL)
    parser_before = None
    world.catch_up()
    parser_before = world.parser_edges()
    await world.live()

    (model, request), *_ = world.provider.calls
    assert model == "kg-model" and "INSERT INTO mart.orders" in request.messages[1].content
    proposed = world.events("LineageEdgeProposed")
    assert len(proposed) == 2  # two of four proposals were valid and resolvable
    for event in proposed:
        p = event.payload
        assert (p["source"], p["status"], p["model"]) == ("llm", "proposed", "kg-model")
        assert (p["project_id"], p["file_path"]) == (P, LOAD) and p["reasoning"]
        assert 0.0 <= p["confidence"] <= 1.0
    edges = {
        (e.source.rsplit(":", 1)[-1], e.target.rsplit(":", 1)[-1]): e for e in world.llm_edges()
    }
    good = edges[("mart.orders", "raw.orders")]
    assert (good.provenance, good.confidence, good.file_path) == ("llm", 0.95, LOAD)
    assert good.properties["source"] == "llm"
    assert good.properties["model"] == "kg-model"
    assert good.properties["status"] == "proposed"
    assert good.properties["verification"] == "verified"
    assert edges[("raw.orders", "mart.orders")].properties["verification"] == "contradicted"
    assert world.parser_edges() == parser_before  # the parser's lineage is untouched

    (done,) = world.events("KGEnrichmentFileProcessed")
    assert done.payload["dropped"] == {"missing_field": 1, "unknown_node": 1}
    assert done.payload["verifications"] == {"contradicted": 1, "verified": 1}


@pytest.mark.spec("LLM-11.3")
async def test_each_run_reports_counts_model_and_confidence_in_logs_events_and_summary(
    world, caplog
):
    caplog.set_level(logging.INFO, "upstream.kg")
    world.configure()
    world.ingest(LOAD, LOAD_SQL)
    await world.live()
    (completed,) = world.events("KGEnrichmentCompleted")
    totals = completed.payload
    assert (totals["proposed"], totals["accepted"], totals["dropped"]) == (2, 0, 2)
    assert totals["models"] == ["kg-model"]
    assert totals["confidence"] == {"min": 0.4, "median": 0.675, "max": 0.95}
    line = next(r.getMessage() for r in caplog.records if "KG enrichment run=" in r.getMessage())
    for part in ("proposed=2", "accepted=0", "model=kg-model", "min 0.40", "max 0.95"):
        assert part in line
    summary = world.service.summary("default", P, 0)
    assert (summary["runs"], summary["pending_files"]) == (1, 0)
    assert (summary["proposed"], summary["accepted"], summary["models_used"]) == (
        2,
        0,
        ["kg-model"],
    )
    assert summary["confidence"]["median"] == 0.675


@pytest.mark.spec("LLM-10.3")
@pytest.mark.spec("LLM-10.5")
@pytest.mark.spec("LLM-10.6")
@pytest.mark.parametrize(
    "failure",
    [
        RateLimited(retry_after=1.0, provider="openai_compatible", model="kg-model"),
        ProviderUnavailable("Service unavailable (503)", status=503),
        MalformedResponse("Malformed response (not JSON)", raw="sure! here are edges"),
        "this is not JSON at all",
    ],
    ids=["429", "503", "malformed", "not-json"],
)
async def test_a_failing_model_fails_open_and_leaves_the_parser_graph_alone(failure, caplog):
    caplog.set_level(logging.WARNING)
    world = World(FakeProvider(kg_model=[failure]))
    world.configure()
    world.ingest(LOAD, LOAD_SQL)
    world.catch_up()
    before = world.graph.dump()
    await world.live()
    assert world.provider.calls  # the model was asked
    assert world.graph.dump() == before  # nothing proposed, the parser's lineage untouched
    (processed,) = world.events("KGEnrichmentFileProcessed")
    assert processed.payload["outcome"] == "failed_open" and processed.payload["proposed"] == 0
    assert processed.payload["error"]
    (completed,) = world.events("KGEnrichmentCompleted")
    assert completed.payload["outcome"] == "failed_open"
    assert "failed open" in caplog.text


@pytest.mark.spec("LLM-10.5")
async def test_the_circuit_breaker_stops_calling_a_model_that_keeps_failing():
    clock = [0.0]
    world = World(FakeProvider(kg_model=[ProviderUnavailable("down", status=503)]))
    world.policy.breaker.clock = lambda: clock[0]
    world.configure()
    for n in range(5):
        world.ingest(f"etl/f{n}.sql", f"insert into t{n} select * from s{n}")
    await world.live()
    assert len(world.provider.calls) == 3  # KG_BREAKER_FAILURES, then no more calls
    outcomes = [e.payload["error"] for e in world.events("KGEnrichmentFileProcessed")]
    assert len(outcomes) == 5 and all(o for o in outcomes)
    assert "circuit open" in outcomes[-1]
    clock[0] += 61  # cooled down: one call is let through (and fails: open again, longer)
    world.ingest("etl/f9.sql", "insert into t9 select * from s9")
    await world.live()
    assert len(world.provider.calls) == 4
    assert world.policy.breaker.cooldown_s == 120
    world.provider.script["kg_model"] = [answer()]
    clock[0] += 121
    world.ingest("etl/f10.sql", "insert into t10 select * from s10")
    await world.live()
    assert len(world.provider.calls) == 5 and world.policy.breaker.open_until is None


async def test_the_extractive_provider_is_skipped_for_kg_edges(world, caplog):
    caplog.set_level(logging.INFO, "upstream.kg")
    world.configure(model="extractive", provider="extractive")
    world.ingest(LOAD, LOAD_SQL)
    await world.live()
    assert world.provider.calls == [] and world.events("KGEnrichmentRequested") == []
    assert caplog.text.count("KG enrichment skips the extractive provider") == 1


async def test_a_redelivered_event_calls_no_model_again(world):
    world.configure()
    world.ingest(LOAD, LOAD_SQL)
    await world.live()
    calls, recorded = len(world.provider.calls), world.app.max_position()
    await world.policy.handle(world.app.read(0, 100_000))  # replay/redelivery of everything
    assert len(world.provider.calls) == calls and world.app.max_position() == recorded


@pytest.mark.spec("LLM-11.2")
async def test_review_accept_and_reject_with_actor_and_the_lineage_modes(world):
    world.configure()
    world.ingest(LOAD, LOAD_SQL)
    world.ingest(REPORT, REPORT_PY)
    world.provider.script["kg_model"] = [LOAD_ANSWER, REPORT_ANSWER]
    await world.live()
    by_target = {e.target.rsplit(":", 1)[-1]: e for e in world.llm_edges()}
    guess = by_target["raw.customers"]
    assert guess.properties["verification"] == "unverified"
    report = "etl/report.py#build"

    def upstream(mode: str) -> set[str]:
        answer = world.lineage.walk("default", P, report, "upstream", 1, include_llm=mode)
        return {n.name for n in answer.subgraph.nodes}

    assert upstream("accepted") == {"staging.totals"}  # default: parser + accepted
    assert upstream("proposed") == {"staging.totals", "raw.customers"}
    world.app.accept_lineage_edge(
        AcceptLineageEdge(edge_id=guess.edge_id, actor="ana@example.com", reason="checked")
    )
    await world.live()
    assert upstream("accepted") == {"staging.totals", "raw.customers"}
    assert upstream("none") == {"staging.totals"}
    accepted = next(e for e in world.llm_edges() if e.edge_id == guess.edge_id)
    assert accepted.properties["status"] == "accepted"
    (row,) = world.service.edges("default", P, status="accepted")
    assert (row["edge_id"], row["decided_by"]) == (guess.edge_id, "ana@example.com")

    world.app.reject_lineage_edge(RejectLineageEdge(edge_id=guess.edge_id, actor="bo"))
    await world.live()
    assert guess.edge_id not in {e.edge_id for e in world.llm_edges()}  # left the graph
    assert upstream("proposed") == {"staging.totals"}
    with pytest.raises(ProposedEdgeNotFound):
        world.app.accept_lineage_edge(AcceptLineageEdge(edge_id="nope"))


async def test_history_lists_every_event_of_an_edge_with_time_and_actor(world):
    world.configure()
    world.ingest(LOAD, LOAD_SQL)
    await world.live()
    verified = next(e for e in world.llm_edges() if e.properties["verification"] == "verified")
    world.app.accept_lineage_edge(AcceptLineageEdge(edge_id=verified.edge_id, actor="ana"))
    await world.live()
    history = world.service.history("default", verified.edge_id)
    assert [e["action"] for e in history["events"]] == ["proposed", "verified", "accepted"]
    assert [e["actor"] for e in history["events"]] == ["kg-enrichment", "parser", "ana"]
    assert all(e["occurred_at"] and e["position"] for e in history["events"])
    assert history["events"][0]["details"]["model"] == "kg-model"

    parser_edge = next(e for e in world.parser_edges() if e.rel == "READS_FROM")
    world.ingest(LOAD, "INSERT INTO mart.orders SELECT id FROM raw.orders_v2;")
    world.app.delete_file(DeleteFile(project_id=P, path=LOAD))
    await world.live()
    parsed = world.service.history("default", parser_edge.edge_id)["events"]
    assert [(e["action"], e["actor"]) for e in parsed] == [
        ("parsed", "parser"),
        ("retracted", "parser"),
    ]
    gone = world.service.history("default", verified.edge_id)["events"][-1]
    assert (gone["action"], gone["actor"]) == ("retracted", "system")  # its file was deleted
    with pytest.raises(EdgeNotReviewable):  # nothing to review in a deleted file
        world.app.accept_lineage_edge(AcceptLineageEdge(edge_id=verified.edge_id))


async def test_auto_accept_takes_verified_proposals_above_the_threshold():
    world = World(FakeProvider(kg_model=[LOAD_ANSWER]), auto_accept_confidence=0.9)
    world.configure()
    world.ingest(LOAD, LOAD_SQL)
    await world.live()
    status = {e.properties["verification"]: e.properties["status"] for e in world.llm_edges()}
    assert status == {"verified": "accepted", "contradicted": "proposed"}
    (accepted,) = world.events("LineageEdgeAccepted")
    assert accepted.payload["actor"] == "auto-accept" and accepted.payload["auto"] is True
    (completed,) = world.events("KGEnrichmentCompleted")
    assert completed.payload["accepted"] == 1


async def test_a_changed_file_retracts_its_stale_proposals_and_keeps_accepted_ones(world):
    world.configure()
    world.ingest(LOAD, LOAD_SQL)
    await world.live()
    edges = {e.properties["verification"]: e for e in world.llm_edges()}
    world.app.accept_lineage_edge(AcceptLineageEdge(edge_id=edges["verified"].edge_id))
    world.provider.script["kg_model"] = [answer()]  # the new version: nothing to propose
    world.ingest(LOAD, LOAD_SQL + "-- reviewed\nINSERT INTO mart.x SELECT 1 FROM raw.orders;\n")
    await world.live()
    left = {e.edge_id: e.properties["status"] for e in world.llm_edges()}
    assert left == {edges["verified"].edge_id: "accepted"}
    (retracted,) = world.events("LineageEdgeRetracted")
    assert retracted.payload["edge_id"] == edges["contradicted"].edge_id


async def test_propose_kg_edges_runs_over_the_project_files_in_scope(world):
    world.configure()
    world.ingest(LOAD, LOAD_SQL)
    world.ingest(REPORT, REPORT_PY)
    world.ingest("docs/readme.md", "# not enriched")
    world.policy.options = EnrichmentOptions(on_ingest=False)
    world.provider.script["kg_model"] = [REPORT_ANSWER]
    await world.live()
    assert world.provider.calls == []  # KG_ENRICH_ON_INGEST=false
    result = world.app.propose_kg_edges(
        ProposeKGEdges(project_id=P, scope=("etl/report.py",), actor="ana")
    )
    await world.live()
    assert len(world.provider.calls) == 1
    run = world.service.run("default", result.aggregate_id)
    assert (run["status"], run["trigger"], run["actor"]) == ("completed", "request", "ana")
    assert [f["path"] for f in run["files"]] == [REPORT]
    assert run["totals"]["proposed"] == 1
    world.app.propose_kg_edges(ProposeKGEdges(project_id=P))
    await world.live()
    assert len(world.provider.calls) == 3  # both SQL/Python files, not the Markdown


@pytest.mark.spec("LLM-11.2")
async def test_replay_rebuilds_the_same_graph_with_accepted_and_rejected_llm_edges(world):
    world.configure()
    world.ingest(LOAD, LOAD_SQL)
    world.ingest(REPORT, REPORT_PY)
    world.provider.script["kg_model"] = [LOAD_ANSWER, REPORT_ANSWER]
    await world.live()
    first, second, third = sorted(world.llm_edges(), key=lambda e: e.edge_id)
    world.app.accept_lineage_edge(AcceptLineageEdge(edge_id=first.edge_id, actor="ana"))
    world.app.reject_lineage_edge(RejectLineageEdge(edge_id=second.edge_id, actor="bo"))
    world.app.accept_lineage_edge(AcceptLineageEdge(edge_id=third.edge_id, actor="ana"))
    world.app.reject_lineage_edge(RejectLineageEdge(edge_id=third.edge_id, actor="cy"))
    await world.live()
    live_graph, live_kg = world.graph.dump(), world.kg.dump()
    statuses = sorted(e.properties["status"] for e in live_graph[1] if e.provenance == "llm")
    assert statuses == ["accepted"]
    calls = len(world.provider.calls)

    for projection in world.projections[:2]:
        rebuild(projection, world.app)  # drop and apply every event again
    assert world.graph.dump() == live_graph and world.kg.dump() == live_kg
    fresh = World(FakeProvider(kg_model=[]))
    fresh.app = world.app
    for projection in fresh.projections[:2]:
        catch_up(projection, world.app)
    assert fresh.graph.dump() == live_graph
    assert len(world.provider.calls) == calls and fresh.provider.calls == []  # no model called
