"""What a sink is: where the worker hands each window document it built (see the package
docstring for when, and for what a failing sink costs)."""

from __future__ import annotations

from typing import Protocol

from ldptel.aggregator.model import WindowDocument


class WindowSink(Protocol):
    """Takes a finished window document; raises if it could not keep it.

    `name` is stable across restarts and the same for every worker writing to the same
    place: an export's backlog of windows still owed to it is keyed by it."""

    @property
    def name(self) -> str: ...

    def write(self, document: WindowDocument) -> None:
        """Keep `document`, replacing what this sink holds for the same (campaign, window):
        writing the same window twice must leave what writing it once does."""
        ...
