"""The tag owners on the bus: the commands and the events other processes may follow.

- `cmd.tag.assign_owner` (request-reply): an `AssignTagOwner` `{"tenant_id", "tag",
  "owner_user_id", "owner_email", "actor"}`; the reply is a `CommandResult` with the event
  position (`changed: false` when the tag already had this owner).
- `cmd.tag.remove_owner` (request-reply): a `RemoveTagOwner` `{"tenant_id", "tag", "actor"}`.
- `events.tag_directory.*` (stream EVENTS): the assignments and removals, in order per tenant.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

CMD_TAG_ASSIGN_OWNER = "cmd.tag.assign_owner"
CMD_TAG_REMOVE_OWNER = "cmd.tag.remove_owner"

EVENT_TAG_OWNER_ASSIGNED = "events.tag_directory.TagOwnerAssigned"
EVENT_TAG_OWNER_REMOVED = "events.tag_directory.TagOwnerRemoved"
EVENT_TAG_DIRECTORY_OPENED = "events.tag_directory.TagDirectoryOpened"


class TagDirectoryOpenedPayload(BaseModel):
    tenant_id: str


class TagOwnerAssignedPayload(BaseModel):
    tenant_id: str
    tag: str = Field(description="The access tag, as carried by the documents")
    owner_user_id: str
    owner_email: str | None = Field(description="None: routing falls back to the admin")
    actor: str = Field(description="Who assigned the owner")


class TagOwnerRemovedPayload(BaseModel):
    tenant_id: str
    tag: str
    previous_owner_user_id: str = Field(description="The owner removed")
    actor: str = Field(description="Who removed the owner")


TAG_EVENT_SCHEMAS: dict[str, tuple[type[BaseModel], str]] = {
    EVENT_TAG_DIRECTORY_OPENED: (
        TagDirectoryOpenedPayload,
        "A tenant's first tag owner assignment (recorded just before it).",
    ),
    EVENT_TAG_OWNER_ASSIGNED: (
        TagOwnerAssignedPayload,
        "A tag's owner is now this user (low-confidence answers are routed to them).",
    ),
    EVENT_TAG_OWNER_REMOVED: (
        TagOwnerRemovedPayload,
        "A tag has no owner any more (routing falls back to the admin).",
    ),
}
