"""Tag owners: the TagDirectory aggregate's rules, the commands, and the read model fed by
their events (the owner lookup that routes low-confidence answers, rag-service.md)."""

from __future__ import annotations

import json

import pytest

from bus.asyncapi import asyncapi_json, envelope_schema
from bus.intake import handle
from bus.tag_subjects import TAG_EVENT_SCHEMAS
from commands.tags import AssignTagOwner, RemoveTagOwner
from domain.answering.confidence import route_target
from domain.tags import InvalidTag, InvalidTagOwner, TagDirectory, TagOwnerNotFound
from projections.rebuild import catch_up, rebuild
from projections.tag_owners import TagOwnersProjection
from queries.tag_owners import TagOwners

pytestmark = pytest.mark.unit

ADMIN = "admin@example.com"


def assign(app, tag, user, email=None, tenant="acme", actor="jane"):
    return app.assign_tag_owner(
        AssignTagOwner(
            tenant_id=tenant, tag=tag, owner_user_id=user, owner_email=email, actor=actor
        )
    )


def remove(app, tag, tenant="acme", actor="jane"):
    return app.remove_tag_owner(RemoveTagOwner(tenant_id=tenant, tag=tag, actor=actor))


def fed(app):
    """A read model caught up from the event store, as the container's start does."""
    projection = TagOwnersProjection()
    catch_up(projection, app)
    return projection, TagOwners(projection.book)


# -- the aggregate ----------------------------------------------------------------------------
def test_assigning_records_an_event_and_the_same_owner_again_records_nothing():
    directory = TagDirectory("acme")
    assert directory.assign(" finance ", "u-7", "fin@example.com", "jane")
    assert not directory.assign("finance", "u-7", "fin@example.com", "bob")
    assert directory.assign("finance", "u-7", "other@example.com", "bob")  # a new email
    events = directory.collect_events()
    assert [type(e).__name__ for e in events] == [
        "TagDirectoryOpened",
        "TagOwnerAssigned",
        "TagOwnerAssigned",
    ]
    assert events[1].tag == "finance" and events[1].actor == "jane"
    assert directory.owner_of("finance") == ("u-7", "other@example.com")


@pytest.mark.parametrize("tag", ["", "   ", "x" * 101])
def test_a_tag_must_be_non_empty_and_at_most_100_characters(tag):
    directory = TagDirectory("acme")
    with pytest.raises(InvalidTag) as caught:
        directory.assign(tag, "u-7", None, "jane")
    assert caught.value.detail_hint
    assert directory.assign("x" * 100, "u-7", None, "jane")


@pytest.mark.parametrize(
    ("user", "email"),
    [("", "a@b.co"), ("  ", None), ("u-1", "not-an-email"), ("u-1", "a@b"), ("u-1", "a b@c.de")],
)
def test_an_owner_needs_a_user_id_and_an_email_that_looks_like_one(user, email):
    with pytest.raises(InvalidTagOwner):
        TagDirectory("acme").assign("finance", user, email, "jane")


def test_removing_an_owner_records_who_was_removed_and_an_unowned_tag_is_refused():
    directory = TagDirectory("acme")
    directory.assign("finance", "u-7", None, "jane")
    directory.remove("finance", "bob")
    removed = directory.collect_events()[-1]
    assert type(removed).__name__ == "TagOwnerRemoved"
    assert (removed.previous_owner_user_id, removed.actor) == ("u-7", "bob")
    with pytest.raises(TagOwnerNotFound):
        directory.remove("finance", "bob")


# -- the commands -----------------------------------------------------------------------------
def test_commands_answer_with_positions_and_unchanged_owners_record_nothing(memory_app):
    first = assign(memory_app, "finance", "u-7", "fin@example.com")
    assert first.changed and first.position == 2  # the directory opened, then the owner
    again = assign(memory_app, "finance", "u-7", "fin@example.com")
    assert not again.changed and again.position == first.position
    other_tenant = assign(memory_app, "finance", "u-1", tenant="globex")
    assert other_tenant.aggregate_id != first.aggregate_id
    gone = remove(memory_app, "finance")
    assert gone.changed and gone.position == memory_app.max_position()


async def test_a_refused_command_answers_a_typed_error_over_the_bus(memory_app):
    bad = await handle(
        memory_app.assign_tag_owner,
        AssignTagOwner(tag="finance", owner_user_id="u-7", owner_email="nope"),
    )
    assert not bad.accepted and bad.error is not None
    assert bad.error["code"] == "invalid_tag_owner" and "nope" in bad.error["message"]
    unowned = await handle(memory_app.remove_tag_owner, RemoveTagOwner(tag="hr"))
    assert unowned.error is not None and unowned.error["code"] == "tag_owner_not_found"
    assert memory_app.max_position() == 0


def test_every_tag_event_validates_against_its_documented_schema(memory_app):
    assign(memory_app, "finance", "u-7", "fin@example.com")
    assign(memory_app, "hr", "u-8")
    remove(memory_app, "hr")
    channels = json.loads(asyncapi_json())["channels"]
    seen = set()
    for envelope in memory_app.read(0, 100):
        seen.add(envelope.subject)
        payload_model, _ = TAG_EVENT_SCHEMAS[envelope.subject]
        parsed = envelope_schema("E", payload_model).model_validate(json.loads(envelope.to_json()))
        assert parsed.model_dump()["payload"] == envelope.payload  # nothing undocumented
        assert envelope.subject in channels
    assert seen == set(TAG_EVENT_SCHEMAS)  # and every documented event really happens
    assert {"cmd.tag.assign_owner", "cmd.tag.remove_owner"} <= set(channels)


# -- the read model ---------------------------------------------------------------------------
@pytest.mark.spec("RAG-07", "RAG-21")
def test_route_target_with_an_owner_from_the_read_model(memory_app):
    assign(memory_app, "finance", "u-7", "fin@example.com", actor="jane")
    assign(memory_app, "finance", "u-9", "other@example.com", tenant="globex")
    _, owners = fed(memory_app)

    assert owners.owner_of("acme", "finance") == ("u-7", "fin@example.com")
    target = route_target(
        [["finance"], ["finance", "hr"]], lambda tag: owners.owner_of("acme", tag), ADMIN, 42
    )
    assert (target.tag, target.owner_user_id, target.owner_email, target.fallback) == (
        "finance",
        "u-7",
        "fin@example.com",
        False,
    )
    assert target.reason == "Low confidence: 42%, routing to finance owner"
    [row] = owners.list("acme")
    assert row["tag"] == "finance" and row["assigned_by"] == "jane" and row["assigned_at"]


@pytest.mark.spec("RAG-07", "RAG-22")
def test_route_target_falls_back_to_the_admin_without_an_owner(memory_app):
    assign(memory_app, "finance", "u-7", "fin@example.com")
    assign(memory_app, "hr", "u-8")  # an owner without an email: no one to route to
    remove(memory_app, "finance")
    _, owners = fed(memory_app)

    def lookup(tag):
        return owners.owner_of("acme", tag)

    for tags, reason in [
        ([["finance"]], "No owner for tag 'finance' - routing to admin"),  # removed
        ([["legal"]], "No owner for tag 'legal' - routing to admin"),  # never had one
        ([["hr"]], "Owner user not found for tag 'hr' - routing to admin"),
    ]:
        target = route_target(tags, lookup, ADMIN, 30)
        assert (target.tag, target.owner_user_id, target.owner_email) == ("system", None, ADMIN)
        assert target.fallback and target.reason == reason
    assert owners.owner_of("globex", "hr") is None  # another tenant sees none of acme's owners


def test_history_lists_each_assignment_and_removal_with_actor_and_time(memory_app):
    assign(memory_app, "finance", "u-7", "fin@example.com", actor="jane")
    assign(memory_app, "finance", "u-8", actor="bob")
    remove(memory_app, "finance", actor="eve")
    _, owners = fed(memory_app)
    history = owners.history("acme", "finance")
    assert [(e["event_type"], e["owner_user_id"], e["actor"]) for e in history] == [
        ("TagOwnerAssigned", "u-7", "jane"),
        ("TagOwnerAssigned", "u-8", "bob"),
        ("TagOwnerRemoved", "u-8", "eve"),
    ]
    assert [e["position"] for e in history] == sorted(e["position"] for e in history)
    assert all(e["at"] for e in history) and owners.list("acme") == []


def test_a_rebuild_gives_the_same_read_model_as_the_live_one(memory_app):
    live = TagOwnersProjection()
    for i in range(12):  # the live projection applies events as they come, in small batches
        assign(memory_app, f"tag-{i % 4}", f"u-{i}", f"u{i}@example.com", tenant=f"t{i % 2}")
        if i % 5 == 4:
            remove(memory_app, f"tag-{i % 4}", tenant=f"t{i % 2}")
        catch_up(live, memory_app, batch=3)
    before = live.book.dump()

    applied = rebuild(live, memory_app)

    assert applied == memory_app.max_position()
    assert live.book.dump() == before and live.position() == memory_app.max_position()
    assert before[0] and before[1]


def test_the_store_follower_reads_only_tag_events_and_reaches_the_head(memory_app):
    from commands.models import IngestFile

    memory_app.ingest_file(IngestFile(path="a.sql", content="select 1"))
    assign(memory_app, "finance", "u-7", "fin@example.com")
    memory_app.ingest_file(IngestFile(path="b.sql", content="select 2"))
    projection = TagOwnersProjection(source=memory_app)
    decoded = []
    original = memory_app.to_envelope
    memory_app.to_envelope = lambda n: decoded.append(n.topic) or original(n)  # type: ignore

    projection.start()  # what every role does first: fill the book from the store

    assert projection.position() == memory_app.max_position()
    assert decoded and all("TagOwner" in topic for topic in decoded)
    owners = TagOwners(projection.book, projection.follow)
    assign(memory_app, "hr", "u-8", "hr@example.com")
    assert owners.owner_of("acme", "hr") == ("u-8", "hr@example.com")  # read-your-writes
    assert owners.position() == memory_app.max_position()
    assert catch_up(projection, memory_app) == 0  # the generic catch-up finds nothing left
