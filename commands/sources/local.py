"""Local files and folders as a source: which files to ingest, read as text."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

SKIPPED_DIRS = {
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".tox",
    "target",
    "dbt_packages",
    ".upstream",
    "vendor",
}
_SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True)
class LocalFile:
    path: str  # relative to the root given
    content: str


@dataclass(frozen=True, slots=True)
class Skipped:
    path: str
    reason: str


def project_files_first(files: list[LocalFile]) -> list[LocalFile]:
    """dbt_project.yml files first: the write side learns a dbt project from it, so the models
    ingested after it are recognised as models."""
    return sorted(files, key=lambda f: (PurePosixPath(f.path).name != "dbt_project.yml", f.path))


def in_vendored_dir(path: str) -> bool:
    return any(part in SKIPPED_DIRS for part in PurePosixPath(path).parts[:-1])


def read_text(path: Path, max_bytes: int) -> str | Skipped:
    size = path.stat().st_size
    if size > max_bytes:
        return Skipped(str(path), f"larger than {max_bytes} bytes")
    data = path.read_bytes()
    if b"\x00" in data[:_SNIFF_BYTES]:
        return Skipped(str(path), "binary")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return Skipped(str(path), "not UTF-8 text")


def walk(root: Path, max_bytes: int) -> Iterator[LocalFile | Skipped]:
    """Every text file under `root` (or `root` itself), skipping VCS, caches and vendored dirs."""
    if root.is_file():
        yield _load(root, root.name, max_bytes)
        return
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        for filename in sorted(filenames):
            full = Path(directory) / filename
            if full.is_symlink():
                continue
            yield _load(full, full.relative_to(root).as_posix(), max_bytes)


def _load(full: Path, relative: str, max_bytes: int) -> LocalFile | Skipped:
    text = read_text(full, max_bytes)
    if isinstance(text, Skipped):
        return Skipped(relative, text.reason)
    return LocalFile(relative, text)
