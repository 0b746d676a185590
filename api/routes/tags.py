"""Tag owners: who answers for an access tag's documents (low-confidence answers go to them).

Writes are commands on `cmd.tag.*`; they answer with the event position and, with
`?wait=true`, once the read models have applied it. Reads come from `container.tag_owners`
(`queries.tag_owners.TagOwners`), the tag owners read model.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from api.deps import Actor, ContainerDep, Wait, send_command, wait_if_asked
from bus.tag_subjects import CMD_TAG_ASSIGN_OWNER, CMD_TAG_REMOVE_OWNER
from commands.tags import AssignTagOwner, RemoveTagOwner
from domain.tags import UnknownTag, no_owner, validate_tag

router = APIRouter(prefix="/api/v1/tags", tags=["tags"])

Tenant = Annotated[str, Query(description="The tenant whose tags these are")]


class OwnerIn(BaseModel):
    owner_user_id: str = Field(description="The owner's user id")
    owner_email: str | None = Field(
        default=None, description="Where routed questions go; without it routing uses the admin"
    )


@router.put("/{tag:path}/owner")
async def assign_owner(
    tag: str,
    body: OwnerIn,
    container: ContainerDep,
    wait: Wait = False,
    actor: Actor = "api",
    tenant_id: Tenant = "default",
) -> dict[str, Any]:
    """Make a user the owner of a tag (assigning the same owner again changes nothing)."""
    command = AssignTagOwner(tenant_id=tenant_id, tag=tag, actor=actor, **body.model_dump())
    result = await send_command(container, CMD_TAG_ASSIGN_OWNER, command)
    waited = await wait_if_asked(container, result, wait)
    clean = validate_tag(tag)
    owner = await _read(container, "owner", tenant_id, clean) if waited else None
    return {
        "status": "assigned",
        "tenant_id": tenant_id,
        "tag": clean,
        "owner": owner,
        "changed": result.changed,
        "position": result.position,
        "waited": waited,
    }


@router.delete("/{tag:path}/owner")
async def remove_owner(
    tag: str,
    container: ContainerDep,
    wait: Wait = False,
    actor: Actor = "api",
    tenant_id: Tenant = "default",
) -> dict[str, Any]:
    """Remove a tag's owner; routing falls back to the admin (404 when it has none)."""
    command = RemoveTagOwner(tenant_id=tenant_id, tag=tag, actor=actor)
    result = await send_command(container, CMD_TAG_REMOVE_OWNER, command)
    waited = await wait_if_asked(container, result, wait)
    return {
        "status": "removed",
        "tenant_id": tenant_id,
        "tag": validate_tag(tag),
        "position": result.position,
        "waited": waited,
    }


@router.get("")
async def list_tags(container: ContainerDep, tenant_id: Tenant = "default") -> dict[str, Any]:
    """Every owned tag of a tenant: tag, owner_user_id, owner_email, assigned_by, assigned_at."""
    tags = await _read(container, "list", tenant_id)
    return {"tenant_id": tenant_id, "tags": tags, "count": len(tags)}


@router.get("/{tag:path}/history")
async def tag_history(
    tag: str, container: ContainerDep, tenant_id: Tenant = "default"
) -> dict[str, Any]:
    """The audit trail of a tag's owners: every assignment and removal, who and when."""
    clean = validate_tag(tag)
    events = await _read(container, "history", tenant_id, clean)
    if not events:
        raise UnknownTag(f"no owner was ever assigned to tag {clean!r} in tenant {tenant_id!r}")
    return {"tenant_id": tenant_id, "tag": clean, "events": events, "count": len(events)}


@router.get("/{tag:path}/owner")
async def get_owner(
    tag: str, container: ContainerDep, tenant_id: Tenant = "default"
) -> dict[str, Any]:
    """The tag's owner (404 when it has none)."""
    clean = validate_tag(tag)
    owner: dict[str, Any] | None = await _read(container, "owner", tenant_id, clean)
    if owner is None:
        raise no_owner(clean, tenant_id)
    return {"tenant_id": tenant_id, **owner}


# -- helpers ----------------------------------------------------------------------------------

async def _read(container: Any, query: str, *args: Any) -> Any:
    return await asyncio.to_thread(getattr(container.tag_owners, query), *args)
