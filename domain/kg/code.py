"""A file's text rebuilt from its recorded chunks (events carry chunks, not the content)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def text_from_chunks(chunks: Iterable[Mapping[str, Any]]) -> str:
    """The file's lines as its chunks cover them; lines no chunk covers (blank ones) are empty.

    A chunk's text may start with context lines that lie outside its range (a `def` line, a
    heading path): only its last `line_end - line_start + 1` lines are its own. A line too long
    for one chunk is cut into pieces of consecutive chunks, which are joined again.
    """
    lines: dict[int, str] = {}
    previous_single: int | None = None
    for chunk in sorted(chunks, key=lambda c: int(c["index"])):
        start, end = int(chunk["line_start"]), int(chunk["line_end"])
        own = str(chunk["text"]).split("\n")
        count = end - start + 1
        if len(own) > count:
            own = own[-count:]
        if count == 1 and previous_single == start and start in lines:
            lines[start] += own[0]
        else:
            for offset, text in enumerate(own):
                lines[start + offset] = text
        previous_single = start if count == 1 else None
    if not lines:
        return ""
    return "\n".join(lines.get(n, "") for n in range(1, max(lines) + 1))
