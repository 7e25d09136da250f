"""Progress for long CLI work: on stderr, on terminals only.

A progress bar is for a person watching a terminal. Into a pipe or a file it would only be
carriage-return noise in someone's log, and beside `--json` a program is the reader, so
`shows_progress` is false in both cases and nothing is written."""

from __future__ import annotations

import time
from typing import TextIO


def shows_progress(stream: TextIO, machine_output: bool = False) -> bool:
    """Whether progress may be drawn on `stream`: a terminal, and no --json output."""
    return stream.isatty() and not machine_output


class ProgressLine:
    """A one-line progress indicator on a terminal (nothing otherwise, see shows_progress)."""

    def __init__(
        self, stream: TextIO, label: str, interval: float = 0.25, *, machine_output: bool = False
    ) -> None:
        self.stream = stream
        self.label = label
        self.interval = interval
        self.active = shows_progress(stream, machine_output)
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
