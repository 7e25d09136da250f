"""How the tests wait: poll a condition until it holds. The deadline is generous (it only
matters when something is really broken: a loaded 2-core machine can take seconds for what
takes milliseconds alone), and LDPTEL_TEST_TIME_SCALE stretches every deadline at once for a
slower machine."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

#: Multiplies every deadline (a float; 1 unless the environment says).
TIME_SCALE = float(os.environ.get("LDPTEL_TEST_TIME_SCALE", "1"))

#: The default deadline: far above what a loaded machine needs, so it only ends a broken run.
DEADLINE_SECONDS = 60.0

T = TypeVar("T")


def scaled(seconds: float) -> float:
    """`seconds` stretched by LDPTEL_TEST_TIME_SCALE (for a subprocess or join timeout)."""
    return seconds * TIME_SCALE


def wait_for(
    condition: Callable[[], T],
    what: str,
    timeout: float = DEADLINE_SECONDS,
    interval: float = 0.01,
) -> T:
    """Return `condition()`'s first true value; fail with `what` if it is still false after
    `timeout` (scaled) seconds. Polls every `interval` seconds (a sleep between polls, so a
    busy poll never takes the CPU from the process it waits for)."""
    deadline = time.monotonic() + scaled(timeout)
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out after {scaled(timeout):.0f} s: {what}"
        time.sleep(interval)
    return value
