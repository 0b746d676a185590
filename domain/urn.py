"""Evidence identifiers: `urn:li:{entity_type}:{project_id}:{asset_path}`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from domain.errors import InvalidProjectId

_PROJECT_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_PREFIX = "urn:li:"


def validate_project_id(project_id: str) -> str:
    if not _PROJECT_ID.match(project_id):
        raise InvalidProjectId(f"project_id {project_id!r} is not valid")
    return project_id


@dataclass(frozen=True, slots=True)
class Urn:
    """A stable id for a piece of evidence: a file, a chunk, a table, a column, an edge."""

    entity_type: str
    project_id: str
    asset_path: str

    def __str__(self) -> str:
        return f"{_PREFIX}{self.entity_type}:{self.project_id}:{self.asset_path}"

    @classmethod
    def parse(cls, text: str) -> Urn:
        if not text.startswith(_PREFIX):
            raise ValueError(f"{text!r} is not an upstream URN (expected {_PREFIX}...)")
        parts = text[len(_PREFIX) :].split(":", 2)
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"{text!r} is not an upstream URN (expected urn:li:type:project:path)")
        return cls(parts[0], parts[1], parts[2])

    @classmethod
    def for_file(cls, project_id: str, path: str) -> Urn:
        return cls("file", project_id, path)

    @classmethod
    def for_chunk(cls, project_id: str, path: str, index: int) -> Urn:
        return cls("chunk", project_id, f"{path}#{index}")
