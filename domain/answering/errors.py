"""Errors raised while building an answer's prompt."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from domain.errors import UpstreamError, _register


class MissingTemplateVariable(UpstreamError):
    """A prompt template was formatted without one of its required variables (a server bug)."""

    code = "missing_template_variable"
    hint = "This is a bug in prompt construction; report it with the template name."
    http_status: ClassVar[int] = 500

    def __init__(
        self, template: str, missing: Iterable[str] = (), *, hint: str | None = None
    ) -> None:
        # Rebuilt from the bus (`error_from_dict`), the first argument is the whole message.
        self.template = template
        self.missing = sorted(missing)
        message = (
            f"prompt template {template} is missing required variable(s): "
            + ", ".join(self.missing)
            if self.missing
            else template
        )
        super().__init__(message, hint=hint)


_register(MissingTemplateVariable)
