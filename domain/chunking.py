"""The chunk value object; `domain.chunkers` cuts files into chunks."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Chunk:
    """A slice of a file's text with the lines it spans (1-based, inclusive)."""

    index: int
    text: str
    line_start: int
    line_end: int
    chunk_type: str

    def to_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "text": self.text,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "chunk_type": self.chunk_type,
        }
