"""Errors raised by the domain. Each carries a stable code, a message and a hint for the person."""

from __future__ import annotations

from typing import ClassVar


class UpstreamError(Exception):
    """Base for every error a client can act on: `code` is stable, `hint` says what to do."""

    code: ClassVar[str] = "upstream_error"
    hint: ClassVar[str] = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail_hint = hint if hint is not None else type(self).hint

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "hint": self.detail_hint}


class InvalidCommand(UpstreamError):
    """A command whose content breaks a rule; nothing was recorded."""

    code = "invalid_command"
    hint = "Correct the request and send it again; nothing was stored."


class EmptyPath(InvalidCommand):
    code = "empty_path"
    hint = "Give the file's path relative to the repository root, e.g. models/orders.sql."


class InvalidPath(InvalidCommand):
    code = "invalid_path"
    hint = "Use a relative path inside the repository without '..' segments."


class InvalidProjectId(InvalidCommand):
    code = "invalid_project_id"
    hint = "Use letters, digits, '-', '_' or '.' (at most 128 characters)."


class ContentTooLarge(InvalidCommand):
    code = "content_too_large"
    hint = "Split the file, or raise UPSTREAM_MAX_FILE_BYTES on the server."


class BinaryContent(InvalidCommand):
    code = "binary_content"
    hint = "Only text files (SQL, Python, YAML, Markdown, ...) can be ingested."


class UnknownProjection(UpstreamError):
    code = "unknown_projection"
    hint = "Run `upstream replay --help` to see the projections this service has."


class NotCaughtUp(UpstreamError):
    """The read models did not reach a position in time."""

    code = "not_caught_up"
    hint = "The write is stored; the read models are still applying it. Retry the read shortly."


class ServiceUnavailable(UpstreamError):
    code = "service_unavailable"
    hint = "Start the service with `upstream serve`, or check its logs."


_ERRORS_BY_CODE: dict[str, type[UpstreamError]] = {}


def _register(*classes: type[UpstreamError]) -> None:
    for cls in classes:
        _ERRORS_BY_CODE[cls.code] = cls


_register(
    UpstreamError,
    InvalidCommand,
    EmptyPath,
    InvalidPath,
    InvalidProjectId,
    ContentTooLarge,
    BinaryContent,
    UnknownProjection,
    NotCaughtUp,
    ServiceUnavailable,
)


def error_from_dict(data: dict[str, str]) -> UpstreamError:
    """Rebuild an error that crossed the bus as `UpstreamError.to_dict()`."""
    cls = _ERRORS_BY_CODE.get(data.get("code", ""), UpstreamError)
    return cls(data.get("message", "unknown error"), hint=data.get("hint"))
