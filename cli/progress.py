"""A one-line progress indicator for long CLI work (stderr, terminals only)."""

from __future__ import annotations

import time
from typing import TextIO


class ProgressLine:
    """A one-line progress indicator on a terminal (nothing when output is not a TTY)."""

    def __init__(self, stream: TextIO, label: str, interval: float = 0.25) -> None:
        self.stream = stream
        self.label = label
        self.interval = interval
        self.active = stream.isatty()
        self.shown = False
        self.last = 0.0

    def __enter__(self) -> ProgressLine:
        self.last = time.monotonic()
        return self

    def update(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.active or (now - self.last < self.interval and done < total):
            return
        self.last = now
        self.shown = True
        self.stream.write(f"\r{self.label}: {100 * done / total:5.1f}% ({done:,}/{total:,})")
        self.stream.flush()

    def __exit__(self, *exc: object) -> None:
        if self.shown:  # clear the line so the result starts clean
            self.stream.write("\r\033[K")
            self.stream.flush()
