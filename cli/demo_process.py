"""`ldptel demo`'s process control: the servers it starts on free ports, the progress
stages, SIGTERM unwinding like Ctrl-C, and the simulated clock of a multi-window run."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from types import FrameType
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # the CLI imports a part only when a command needs it
    pass


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every `finally` stops what the demo started."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Stage:
    """One stage of the demo: a tqdm progress bar on stderr where progress is shown (a
    terminal, no --json: cli/progress.py); `TIMINGS` keeps its seconds."""

    TIMINGS: ClassVar[dict[str, float]] = {}

    def __init__(
        self, description: str, show: bool, total: int | None = None, unit: str = "it"
    ) -> None:
        from tqdm import tqdm

        self.description = description
        self.started = time.perf_counter()
        self.bar = tqdm(
            total=total, desc=f"{description:<22}", unit=unit, unit_scale=True, file=sys.stderr,
            leave=True, dynamic_ncols=True, disable=not show,
        )  # fmt: skip
        self.lock = threading.Lock()

    def advance(self, amount: int = 1) -> None:
        with self.lock:
            self.bar.update(amount)

    def close(self) -> None:
        self.bar.close()
        Stage.TIMINGS[self.description] = time.perf_counter() - self.started


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """The WSGI app on a free loopback port in a background thread; yields its base URL."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    # shutdown() waits for serve_forever to next look at its flag: every 0.5 s by default.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="collector", daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class SimulatedClock:
    """The demo collector's clock: the wall clock moved back by `offset` seconds, so that the
    simulated users of `--windows K` report into K consecutive past windows (production
    collectors stamp windows from the wall clock only)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return time.time() - self.offset


def serve_dashboard(redis_url: str, name: str, stack: ExitStack) -> None:
    """The dashboard over the demo's Redis on a loopback port, until Ctrl-C."""
    import redis

    from ldptel.dashboard import create_app

    client = redis.Redis.from_url(redis_url)
    stack.callback(client.close)
    base_url = stack.enter_context(serve(create_app(client)))
    print(f"Dashboard: {base_url}/campaigns/{name} (Ctrl-C stops the demo)", flush=True)
    with suppress(KeyboardInterrupt):
        threading.Event().wait()
