"""The Reporters alive in this process and what the process does to them: around fork() their
SQLite connections are closed and reopened (none may be inherited, no transaction may be open
across it), and at the interpreter's exit each one not closed delivers its spool for up to its
exit_timeout (posthog-python and sentry-sdk do the same); the rest stays spooled for the next
run. The hooks are registered once, when this module is first imported."""

from __future__ import annotations

import atexit
import logging
import os
import weakref
from collections.abc import Callable
from typing import Protocol

from ldptel.client.settings import Settings

LOG = logging.getLogger("ldptel.client")


class Live(Protocol):
    """What the hooks call on a Reporter."""

    settings: Settings

    def close(self, timeout: float = ...) -> None: ...

    def _before_fork(self) -> None: ...

    def _after_fork_parent(self) -> None: ...

    def _after_fork_child(self) -> None: ...


#: Reporters alive in this process (weak: a dropped Reporter is gone).
_LIVE: weakref.WeakSet[Live] = weakref.WeakSet()


def add(reporter: Live) -> None:
    _LIVE.add(reporter)


def discard(reporter: Live) -> None:
    _LIVE.discard(reporter)


def _each(hook: Callable[[Live], None]) -> Callable[[], None]:
    def run() -> None:
        for reporter in list(_LIVE):
            hook(reporter)

    return run


os.register_at_fork(
    before=_each(lambda reporter: reporter._before_fork()),
    after_in_parent=_each(lambda reporter: reporter._after_fork_parent()),
    after_in_child=_each(lambda reporter: reporter._after_fork_child()),
)


@atexit.register
def _close_at_exit() -> None:
    """Deliver what the app did not close(): up to each Reporter's exit_timeout."""
    for reporter in list(_LIVE):
        try:
            reporter.close(timeout=reporter.settings.exit_timeout)
        except Exception:  # exiting anyway: never turn an exit into a traceback
            LOG.exception("ldptel: closing a Reporter at exit failed")
