"""Git repositories as a source: a shallow clone, the files git tracks, the commit ingested."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from commands.sources.local import LocalFile, Skipped, in_vendored_dir, read_text
from domain.errors import InvalidCommand, UpstreamError

_REMOTE = re.compile(r"^(https://|ssh://|git://|git@[\w.\-]+:)")
_LOCAL = re.compile(r"^(file://|/)")
_SAFE_REF = re.compile(r"^[\w./\-]{1,200}$")


class GitSourceRefused(InvalidCommand):
    code = "git_source_refused"
    hint = "Use an https:// or ssh:// URL (local paths need UPSTREAM_GIT_ALLOW_LOCAL=true)."


class GitCloneFailed(UpstreamError):
    code = "git_clone_failed"
    hint = "Check the URL, the ref and that the server is reachable from the upstream host."


@dataclass(frozen=True, slots=True)
class Checkout:
    root: Path
    commit: str
    ref: str | None


def check_url(url: str, allow_local: bool) -> None:
    if _REMOTE.match(url):
        return
    if _LOCAL.match(url):
        if allow_local:
            return
        raise GitSourceRefused(f"local repositories are not allowed here: {url}")
    raise GitSourceRefused(f"not a git URL this service accepts: {url!r}")


def _git(args: Sequence[str], cwd: Path, timeout: float) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false"}
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as error:
        raise GitCloneFailed(f"git {args[0]} took longer than {timeout:.0f} s") from error
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no detail"
        raise GitCloneFailed(f"git {args[0]} failed: {detail}")
    return done.stdout


@contextmanager
def shallow_checkout(
    url: str, ref: str | None = None, *, allow_local: bool = False, timeout: float = 300
) -> Iterator[Checkout]:
    """Fetch `ref` (branch, tag or commit; default the remote HEAD) at depth 1 into a temp dir."""
    check_url(url, allow_local)
    if ref is not None and not _SAFE_REF.match(ref):
        raise GitSourceRefused(f"not a valid git ref: {ref!r}")
    work = Path(tempfile.mkdtemp(prefix="upstream-git-"))
    try:
        _git(["init", "--quiet"], work, timeout)
        _git(["remote", "add", "origin", url], work, timeout)
        _git(["fetch", "--quiet", "--depth", "1", "origin", ref or "HEAD"], work, timeout)
        _git(["checkout", "--quiet", "FETCH_HEAD"], work, timeout)
        commit = _git(["rev-parse", "HEAD"], work, timeout).strip()
        yield Checkout(work, commit, ref)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def tracked_files(
    checkout: Checkout,
    max_bytes: int,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> Iterator[LocalFile | Skipped]:
    """The files git tracks (so .gitignore holds), minus vendored dirs, binaries and excludes."""
    listing = _git(["ls-files", "-z"], checkout.root, 60)
    for path in sorted(p for p in listing.split("\0") if p):
        if in_vendored_dir(path) or not _selected(path, include, exclude):
            continue
        full = checkout.root / path
        if full.is_symlink() or not full.is_file():
            continue
        text = read_text(full, max_bytes)
        yield Skipped(path, text.reason) if isinstance(text, Skipped) else LocalFile(path, text)


def _selected(path: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    if include and not any(fnmatch(path, pattern) for pattern in include):
        return False
    return not any(fnmatch(path, pattern) for pattern in exclude)
