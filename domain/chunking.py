"""Line-window chunking: the first, language-blind chunker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

_CHUNK_TYPES = {
    ".sql": "sql",
    ".py": "python",
    ".md": "markdown",
    ".yml": "yaml",
    ".yaml": "yaml",
}


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


def chunk_type_for(path: str) -> str:
    return _CHUNK_TYPES.get(PurePosixPath(path).suffix.lower(), "text")


def chunk_lines(
    path: str, content: str, *, max_lines: int = 30, max_chars: int = 900, overlap: int = 3
) -> list[Chunk]:
    """Cut `content` into windows of at most `max_lines` lines and about `max_chars` characters.

    Windows overlap by `overlap` lines so a phrase cut at a border is whole in one of them.
    A single line longer than `max_chars` becomes its own chunk, split at `max_chars`.
    """
    lines = content.splitlines()
    kind = chunk_type_for(path)
    chunks: list[Chunk] = []
    start = 0
    while start < len(lines):
        end = _window_end(lines, start, max_lines, max_chars)
        chunks.extend(_make_chunks(lines, start, end, kind, len(chunks), max_chars))
        if end >= len(lines):
            break
        start = max(end - overlap, start + 1)
    return [c for c in chunks if c.text.strip()]


def _window_end(lines: list[str], start: int, max_lines: int, max_chars: int) -> int:
    size = 0
    end = start
    while end < len(lines) and end - start < max_lines:
        size += len(lines[end]) + 1
        if size > max_chars and end > start:
            break
        end += 1
    return end


def _make_chunks(
    lines: list[str], start: int, end: int, kind: str, first_index: int, max_chars: int
) -> list[Chunk]:
    text = "\n".join(lines[start:end])
    if len(text) <= max_chars:
        return [Chunk(first_index, text, start + 1, end, kind)]
    pieces = [text[i : i + max_chars] for i in range(0, len(text), max_chars)]
    return [Chunk(first_index + n, piece, start + 1, end, kind) for n, piece in enumerate(pieces)]
