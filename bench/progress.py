"""Progress of a long run: a bar on a terminal, a log line every few seconds otherwise."""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

log = logging.getLogger("upstream.bench")


class Progress:
    """Counts steps of one task. On a terminal it redraws one line on `stream`; elsewhere
    (logs, CI) it logs `label: done/total` at most every `interval` seconds, and at the end."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        stream: TextIO | None = None,
        interval: float = 5.0,
        tty: bool | None = None,
        width: int = 30,
    ) -> None:
        self.label = label
        self.total = max(total, 0)
        self.done = 0
        self.stream = stream or sys.stderr
        self.interval = interval
        self.tty = self.stream.isatty() if tty is None else tty
        self.width = width
        self.started = time.monotonic()
        self._last_log = self.started
        self._closed = False

    def advance(self, steps: int = 1, note: str = "") -> None:
        self.done = min(self.done + steps, self.total) if self.total else self.done + steps
        if self.tty:
            self._draw(note)
            return
        now = time.monotonic()
        if now - self._last_log >= self.interval or (self.total and self.done >= self.total):
            self._last_log = now
            log.info("%s: %s%s", self.label, self._counts(), f" ({note})" if note else "")

    def close(self, note: str = "") -> None:
        """End the line on a terminal (a run interrupted half-way leaves its count visible)."""
        if self._closed:
            return
        self._closed = True
        if self.tty:
            self._draw(note)
            self.stream.write("\n")
            self.stream.flush()
        elif self.done < self.total:
            log.info(
                "%s: stopped at %s%s", self.label, self._counts(), f" ({note})" if note else ""
            )

    def _counts(self) -> str:
        elapsed = time.monotonic() - self.started
        return f"{self.done}/{self.total} in {elapsed:.1f} s" if self.total else f"{self.done}"

    def _draw(self, note: str) -> None:
        filled = int(self.width * self.done / self.total) if self.total else self.width
        bar = "#" * filled + "." * (self.width - filled)
        tail = f" {note}" if note else ""
        self.stream.write(f"\r{self.label} [{bar}] {self._counts()}{tail}\x1b[K")
        self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
