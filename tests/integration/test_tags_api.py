"""Tag owners through the HTTP API and the CLI, on the real embedded service (NATS command bus,
SQLite event store, relay, live projection runner); and the `api` role, which runs no
projection, reading the same event store."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from adapters.bootstrap import bootstrap
from adapters.memory import HashingEmbedder
from adapters.settings import Settings
from api.app import create_app
from commands.tags import AssignTagOwner

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    data = tmp_path_factory.mktemp("tags")
    settings = Settings(UPSTREAM_DATA_DIR=data, UPSTREAM_SEED_PROFILE="none")  # type: ignore[call-arg]
    container = bootstrap(settings, "serve", embedder=HashingEmbedder())
    with TestClient(create_app(container=container)) as client:
        client.container = container  # type: ignore[attr-defined]
        yield client


def _put(service, tag, tenant, body, actor="jane"):
    return service.put(
        f"/api/v1/tags/{tag}/owner",
        params={"tenant_id": tenant, "wait": "true"},
        json=body,
        headers={"X-Actor": actor},
    )


def test_assign_read_reassign_remove_and_the_audit_trail(service):
    tenant = "acme"
    reply = _put(service, "finance", tenant, {"owner_user_id": "u-7", "owner_email": "f@x.io"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["waited"] and body["changed"] and body["position"]
    assert body["owner"]["owner_user_id"] == "u-7" and body["owner"]["assigned_by"] == "jane"
    # the chat service's lookup sees the write at once
    assert service.container.tag_owners.owner_of(tenant, "finance") == ("u-7", "f@x.io")

    again = _put(service, "finance", tenant, {"owner_user_id": "u-7", "owner_email": "f@x.io"})
    assert not again.json()["changed"] and again.json()["position"] == body["position"]
    _put(service, "finance", tenant, {"owner_user_id": "u-8", "owner_email": "g@x.io"}, "bob")

    listed = service.get("/api/v1/tags", params={"tenant_id": tenant}).json()
    assert [(t["tag"], t["owner_user_id"], t["assigned_by"]) for t in listed["tags"]] == [
        ("finance", "u-8", "bob")
    ]
    assert service.get("/api/v1/tags", params={"tenant_id": "globex"}).json()["count"] == 0
    owner = service.get("/api/v1/tags/finance/owner", params={"tenant_id": tenant}).json()
    assert owner["owner_email"] == "g@x.io"

    gone = service.delete(
        "/api/v1/tags/finance/owner",
        params={"tenant_id": tenant, "wait": "true"},
        headers={"X-Actor": "eve"},
    )
    assert gone.status_code == 200 and gone.json()["waited"]
    assert service.container.tag_owners.owner_of(tenant, "finance") is None

    history = service.get("/api/v1/tags/finance/history", params={"tenant_id": tenant}).json()
    assert [(e["event_type"], e["owner_user_id"], e["actor"]) for e in history["events"]] == [
        ("TagOwnerAssigned", "u-7", "jane"),
        ("TagOwnerAssigned", "u-8", "bob"),
        ("TagOwnerRemoved", "u-8", "eve"),
    ]
    assert all(e["at"] for e in history["events"])


def test_bad_input_gets_a_clear_error(service):
    cases = [
        (_put(service, "%20", "acme", {"owner_user_id": "u-1"}), 400, "invalid_tag"),
        (_put(service, "x" * 101, "acme", {"owner_user_id": "u-1"}), 400, "invalid_tag"),
        (
            _put(service, "hr", "acme", {"owner_user_id": "u-1", "owner_email": "nope"}),
            400,
            "invalid_tag_owner",
        ),
        (_put(service, "hr", "acme", {"owner_email": "a@b.co"}), 422, "invalid_request"),
        (service.delete("/api/v1/tags/legal/owner"), 404, "tag_owner_not_found"),
        (service.get("/api/v1/tags/legal/owner"), 404, "tag_owner_not_found"),
        (service.get("/api/v1/tags/legal/history"), 404, "unknown_tag"),
    ]
    for reply, status, code in cases:
        assert reply.status_code == status, reply.text
        assert reply.json()["error"] == code and reply.json()["message"]


def test_replay_rebuilds_the_same_tag_owners(service):
    for i in range(3):
        _put(service, f"team/{i}", "replay", {"owner_user_id": f"u-{i}"})
    book = service.container.projections["tag_owners"].book
    live = book.dump()

    reply = service.post("/api/v1/replay", json={"projection": "tag_owners"})

    assert reply.status_code == 200, reply.text
    assert reply.json()["replayed"]["tag_owners"] == service.container.app.max_position()
    assert book.dump() == live
    tags = service.get("/api/v1/tags", params={"tenant_id": "replay"}).json()["tags"]
    assert [t["tag"] for t in tags] == ["team/0", "team/1", "team/2"]  # a tag may hold '/'


def test_the_cli_assigns_and_lists_through_the_api(service, monkeypatch):
    from api import cli as cli_module
    from api.client import UpstreamClient

    def client(_url):
        found = UpstreamClient("http://testserver")
        found._http = service  # the TestClient is an httpx.Client on the app
        return found

    monkeypatch.setattr(cli_module, "_client", client)
    runner = CliRunner()
    args = ["tags", "assign", "ops", "--owner-id", "u-5", "--email", "o@x.io", "--tenant", "cli"]
    assigned = runner.invoke(cli_module.cli, args)
    assert assigned.exit_code == 0, assigned.output
    assert "ops: u-5 <o@x.io> assigned" in assigned.output
    listed = runner.invoke(cli_module.cli, ["tags", "list", "--tenant", "cli"])
    assert listed.exit_code == 0 and "ops\tu-5 <o@x.io>\tby cli" in listed.output
    bad = runner.invoke(cli_module.cli, [*args[:5], "--email", "nope"])
    assert bad.exit_code == 1 and "does not look like an email" in bad.output


def test_an_api_process_reads_the_event_store_itself(tmp_path):
    """The `api` role runs no projection: its tag owners follow the event store, so a write
    made by another process is read at once, and a waited write never times out."""
    settings = Settings(UPSTREAM_DATA_DIR=tmp_path / "data")  # type: ignore[call-arg]
    container = bootstrap(settings, "api", embedder=HashingEmbedder())
    try:
        container._ensure_read_models()  # what start() does first, in every role
        assert container.tag_owners.list("acme") == []
        result = container.app.assign_tag_owner(  # as a worker process would record it
            AssignTagOwner(tenant_id="acme", tag="finance", owner_user_id="u-7")
        )
        assert container.read_model_position("tag_owners") == result.position
        assert container.tag_owners.owner_of("acme", "finance") == ("u-7", None)
    finally:
        container.app.close()
        container.index.close()
        container.graph.close()
        container.model_configs.close()
        container.collections.close()
