"""Tag owners: who answers for the documents of an access tag (rag-service.md, Tag Owner Lookup).

A low-confidence chat answer is routed to the owner of the context's most common tag. Owners are
facts recorded here, one `TagDirectory` aggregate per tenant (id = uuid5 of the tenant), so one
tenant's assignments are ordered and two writers racing on them conflict in the store. Events:

- `TagDirectoryOpened(tenant_id)`: the tenant's first assignment (saved with it).
- `TagOwnerAssigned(tenant_id, tag, owner_user_id, owner_email, actor)`: the tag's owner is now
  this user (replacing any previous owner). Assigning the same owner and email again records
  nothing.
- `TagOwnerRemoved(tenant_id, tag, previous_owner_user_id, actor)`: the tag has no owner any more
  (routing falls back to the admin).

Every event carries `actor` (who); the store adds when.
"""

from __future__ import annotations

import re
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.errors import InvalidCommand, UpstreamError, _register

_NAMESPACE = UUID("0b7f6f8e-4c1d-4e59-a1f3-2d9e8c7b6a51")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s.]+$")

MAX_TAG_LENGTH = 100
MAX_USER_ID_LENGTH = 200
MAX_EMAIL_LENGTH = 254


# -- errors ---------------------------------------------------------------------------------
class InvalidTag(InvalidCommand):
    code = "invalid_tag"
    hint = f"Give the access tag as stored on the documents: 1 to {MAX_TAG_LENGTH} characters."


class InvalidTagOwner(InvalidCommand):
    code = "invalid_tag_owner"
    hint = (
        'Send {"owner_user_id": "u-42", "owner_email": "jane@example.com"}: a non-empty user id '
        "and, optionally, an email address of the form name@domain.tld."
    )


class TagOwnerNotFound(UpstreamError):
    """The tag has no owner (never had one, or it was removed). HTTP 404."""

    code = "tag_owner_not_found"
    hint = "List the tags and their owners with GET /api/v1/tags (or `upstream tags list`)."


class UnknownTag(UpstreamError):
    """No owner was ever recorded for the tag, so it has no history. HTTP 404."""

    code = "unknown_tag"
    hint = "Assign an owner first with PUT /api/v1/tags/{tag}/owner (or `upstream tags assign`)."


_register(InvalidTag, InvalidTagOwner, TagOwnerNotFound, UnknownTag)


# -- values ---------------------------------------------------------------------------------
def validate_tag(tag: object) -> str:
    """The tag without surrounding blanks; refused when empty or longer than 100 characters."""
    if not isinstance(tag, str) or not tag.strip():
        raise InvalidTag("the tag must be a non-empty string")
    clean = tag.strip()
    if len(clean) > MAX_TAG_LENGTH:
        raise InvalidTag(
            f"the tag is {len(clean)} characters long; at most {MAX_TAG_LENGTH} are allowed"
        )
    return clean


def validate_owner(owner_user_id: object, owner_email: object) -> tuple[str, str | None]:
    """A non-empty user id and an email that looks like one (or None); blanks stripped."""
    if not isinstance(owner_user_id, str) or not owner_user_id.strip():
        raise InvalidTagOwner("owner_user_id must be a non-empty string")
    user_id = owner_user_id.strip()
    if len(user_id) > MAX_USER_ID_LENGTH:
        raise InvalidTagOwner(f"owner_user_id is longer than {MAX_USER_ID_LENGTH} characters")
    if owner_email is None or (isinstance(owner_email, str) and not owner_email.strip()):
        return user_id, None
    if not isinstance(owner_email, str):
        raise InvalidTagOwner("owner_email must be a string")
    email = owner_email.strip()
    if len(email) > MAX_EMAIL_LENGTH or not _EMAIL.match(email):
        raise InvalidTagOwner(f"owner_email {email!r} does not look like an email address")
    return user_id, email


# -- the aggregate --------------------------------------------------------------------------
class TagDirectory(Aggregate):
    """A tenant's tags and their owners."""

    @staticmethod
    def create_id(tenant_id: str) -> UUID:
        return uuid5(_NAMESPACE, f"tag-directory/{tenant_id}")

    @event("TagDirectoryOpened")
    def __init__(self, tenant_id: str) -> None:
        self.tenant_id = tenant_id
        self.owners: dict[str, tuple[str, str | None]] = {}

    @event("TagOwnerAssigned")
    def _record_assigned(
        self,
        tenant_id: str,
        tag: str,
        owner_user_id: str,
        owner_email: str | None,
        actor: str,
    ) -> None:
        self.owners[tag] = (owner_user_id, owner_email)

    @event("TagOwnerRemoved")
    def _record_removed(
        self, tenant_id: str, tag: str, previous_owner_user_id: str, actor: str
    ) -> None:
        self.owners.pop(tag, None)

    # -- decisions ----------------------------------------------------------------------------
    def owner_of(self, tag: str) -> tuple[str, str | None] | None:
        return self.owners.get(tag)

    def assign(self, tag: str, owner_user_id: str, owner_email: str | None, actor: str) -> bool:
        """Make the user the tag's owner; False (nothing recorded) when it is already."""
        clean_tag = validate_tag(tag)
        owner = validate_owner(owner_user_id, owner_email)
        if self.owners.get(clean_tag) == owner:
            return False
        self._record_assigned(self.tenant_id, clean_tag, owner[0], owner[1], actor)
        return True

    def remove(self, tag: str, actor: str) -> None:
        """The tag has no owner any more; refused when it has none."""
        clean_tag = validate_tag(tag)
        owner = self.owners.get(clean_tag)
        if owner is None:
            raise no_owner(clean_tag, self.tenant_id)
        self._record_removed(self.tenant_id, clean_tag, owner[0], actor)


def no_owner(tag: str, tenant_id: str) -> TagOwnerNotFound:
    return TagOwnerNotFound(f"tag {tag!r} has no owner in tenant {tenant_id!r}")
