"""Uploaded archives (zip, tar, tar.gz): sanitised paths, bounded sizes, bombs refused."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from commands.sources.local import LocalFile, Skipped, in_vendored_dir
from domain.errors import InvalidCommand

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")


class ArchiveRefused(InvalidCommand):
    code = "archive_refused"
    hint = "Upload a zip or tar archive of text files within the stated limits."


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    max_members: int = 20_000
    max_total_bytes: int = 200_000_000
    max_file_bytes: int = 1_000_000
    max_ratio: float = 200.0  # uncompressed / compressed, for the whole archive


def is_archive(filename: str) -> bool:
    return filename.lower().endswith(ARCHIVE_SUFFIXES)


def safe_member_path(name: str) -> str | None:
    """A repository-relative path, or None for names that try to escape or mean nothing."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("/", ".")]
    if not parts or ".." in parts or any(":" in p for p in parts[:1]):
        return None
    return "/".join(parts)


def read_archive(
    filename: str, data: bytes, limits: ArchiveLimits
) -> Iterator[LocalFile | Skipped]:
    if filename.lower().endswith(".zip"):
        yield from _zip(data, limits)
    else:
        yield from _tar(data, limits)


def _check_totals(count: int, total: int, compressed: int, limits: ArchiveLimits) -> None:
    if count > limits.max_members:
        raise ArchiveRefused(f"the archive has more than {limits.max_members} entries")
    if total > limits.max_total_bytes:
        raise ArchiveRefused(f"the archive expands to more than {limits.max_total_bytes} bytes")
    if compressed and total > 10_000_000 and total / compressed > limits.max_ratio:
        raise ArchiveRefused(
            f"the archive expands {total / compressed:.0f}x (limit {limits.max_ratio:.0f}x): "
            "refused as a possible zip bomb"
        )


def _zip(data: bytes, limits: ArchiveLimits) -> Iterator[LocalFile | Skipped]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as error:
        raise ArchiveRefused(f"not a readable zip archive ({error})") from error
    members = [m for m in archive.infolist() if not m.is_dir()]
    _check_totals(len(members), sum(m.file_size for m in members), len(data), limits)
    for member in members:
        path = safe_member_path(member.filename)
        if path is None:
            yield Skipped(member.filename, "unsafe path")
        elif in_vendored_dir(path):
            continue
        elif member.file_size > limits.max_file_bytes:
            yield Skipped(path, f"larger than {limits.max_file_bytes} bytes")
        else:
            yield _decode(path, _read_bounded(archive, member, limits.max_file_bytes))


def _read_bounded(archive: zipfile.ZipFile, member: zipfile.ZipInfo, limit: int) -> bytes:
    with archive.open(member) as handle:  # the header's size can lie: read at most limit + 1
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ArchiveRefused(f"{member.filename} expands beyond its declared size")
    return data


def _tar(data: bytes, limits: ArchiveLimits) -> Iterator[LocalFile | Skipped]:
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")  # noqa: SIM115
    except tarfile.TarError as error:
        raise ArchiveRefused(f"not a readable tar archive ({error})") from error
    with archive:
        yield from _tar_members(archive, len(data), limits)


def _tar_members(
    archive: tarfile.TarFile, compressed: int, limits: ArchiveLimits
) -> Iterator[LocalFile | Skipped]:
    members = archive.getmembers()
    files = [m for m in members if m.isfile()]
    _check_totals(len(members), sum(m.size for m in files), compressed, limits)
    for member in members:
        path = safe_member_path(member.name)
        if not member.isfile():
            if member.issym() or member.islnk() or member.isdev():
                yield Skipped(member.name, "links and devices are not ingested")
            continue
        if path is None:
            yield Skipped(member.name, "unsafe path")
        elif in_vendored_dir(path):
            continue
        elif member.size > limits.max_file_bytes:
            yield Skipped(path, f"larger than {limits.max_file_bytes} bytes")
        else:
            handle = archive.extractfile(member)
            yield _decode(path, handle.read(limits.max_file_bytes + 1) if handle else b"")


def _decode(path: str, data: bytes) -> LocalFile | Skipped:
    if b"\x00" in data[:8192]:
        return Skipped(path, "binary")
    try:
        return LocalFile(path, data.decode("utf-8"))
    except UnicodeDecodeError:
        return Skipped(path, "not UTF-8 text")
