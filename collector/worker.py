"""The gunicorn worker of `ldptel collector serve`: gevent, so a slow or idle connection costs
a greenlet, not a thread; the request body is read in full (up to the size cap, within
`body_timeout_seconds`) before the Flask app sees it; and gunicorn's own error answers and log
lines are replaced by JSON ones without client addresses or request bytes (docs/collector.md).

Why not gthread: each request holds one of a worker's threads while its body arrives, so 16
clients sending a byte per second took every thread (issue 13).
"""

from __future__ import annotations

import io
import json
import logging
import signal
import socket
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from types import FrameType
from typing import Any

import gevent
from gunicorn import glogging
from gunicorn.http import errors
from gunicorn.workers.ggevent import GeventWorker

LOG = logging.getLogger("ldptel.collector")
#: After SIGTERM, a connection waiting for its next request is closed this much later (a
#: request already on its way is still served, with Connection: close).
STOP_LINGER_SECONDS = 1.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
_LINGER_SECONDS = 1.0
_LINGER_BYTES = 256 * 1024
_CHUNK = 64 * 1024

# gunicorn's parse errors (ParseException subclasses), as (status, field, reason). The reason
# is ours: gunicorn's messages quote the request bytes.
_PARSE_ERRORS: tuple[tuple[type[Exception], int, str, str], ...] = (
    (errors.LimitRequestLine, 414, "path", "request line too long"),
    (errors.LimitRequestHeaders, 431, "headers", "too many or too large header fields"),
    (errors.InvalidRequestLine, 400, "request", "malformed request line"),
    (errors.InvalidRequestMethod, 400, "method", "malformed method"),
    (errors.InvalidHTTPVersion, 400, "request", "unsupported HTTP version"),
    (errors.InvalidHeaderName, 400, "headers", "malformed header name"),
    (errors.InvalidHeader, 400, "headers", "malformed header"),
    (errors.InvalidChunkSize, 400, "body", "malformed chunked encoding"),
    (errors.ChunkMissingTerminator, 400, "body", "malformed chunked encoding"),
    (errors.InvalidChunkExtension, 400, "body", "malformed chunked encoding"),
    (errors.UnsupportedTransferCoding, 501, "Transfer-Encoding", "not supported"),
    (errors.ObsoleteFolding, 400, "headers", "obsolete line folding"),
    (errors.ExpectationFailed, 417, "Expect", "only 100-continue is supported"),
    (errors.ParseException, 400, "request", "malformed request"),
)
_REASONS = {
    400: "Bad Request",
    408: "Request Timeout",
    414: "URI Too Long",
    417: "Expectation Failed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
}


@dataclass(frozen=True)
class BodyLimits:
    """What the worker reads of a request's body before the app runs, and for how long (the
    collector's: CollectorConfig; the dashboard's: a login form)."""

    timeout_seconds: float
    max_bytes: int


class BodyTimeoutError(Exception):
    """The request body did not arrive within `body_timeout_seconds`."""


def error_answer(exc: BaseException) -> tuple[int, str, str]:
    """(status, field, reason) of an error gunicorn raised while parsing a request."""
    for kind, status, field, reason in _PARSE_ERRORS:
        if isinstance(exc, kind):
            return status, field, reason
    if isinstance(exc, BodyTimeoutError):
        return 408, "body", "not received in time"
    return 500, "server", "internal error"


def json_response(status: int, field: str, reason: str) -> bytes:
    """A complete HTTP/1.1 answer that closes the connection, with the collector's JSON error."""
    body = json.dumps({"error": {"field": field, "reason": reason}}).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def log_event(event: str, **fields: object) -> None:
    """One JSON line, never with an address or request bytes."""
    LOG.warning({"event": event, **fields})  # a JSON line (store/logs.py)


def stop_queued(handler: object) -> bool:
    """Whether gunicorn's arbiter handler `handler`, inherited through the fork, queued a
    stop signal (TERM, INT, QUIT) in this worker's copy of the arbiter's signal queue (a
    queue.SimpleQueue since gunicorn 24, a list before); the queue is emptied."""
    queue = getattr(getattr(handler, "__self__", None), "SIG_QUEUE", None)
    if isinstance(queue, list):
        queued, queue[:] = list(queue), []
    elif queue is not None and hasattr(queue, "get_nowait"):
        queued = []
        while not queue.empty():
            queued.append(queue.get_nowait())
    else:
        return False
    return any(sig in _STOP_SIGNALS for sig in queued)


class GunicornLogger(glogging.Logger):  # type: ignore[misc]
    """gunicorn's logger without its access line. The app writes its own (without the
    client's address); gunicorn's access logger is off (logs.gunicorn_logconfig), yet with a
    logging config it would still build every request's atoms, the address among them, only
    to drop them: 3% of a single-report request's CPU."""

    def access(self, resp: Any, req: Any, environ: Any, request_time: Any) -> None:
        return None


class CollectorWorker(GeventWorker):  # type: ignore[misc]
    """gunicorn's gevent worker with a buffered, time-bounded body and JSON errors.

    Waiting for a request's line and headers is bounded by gunicorn's `keepalive` (5 s: an
    idle or slow-header connection is closed then), and ends STOP_LINGER_SECONDS after a
    SIGTERM; the body is bounded by `body_timeout_seconds`.
    """

    def init_process(self) -> None:
        # Until gunicorn's init_signals (after gevent's patching), a SIGTERM would run the
        # handler inherited from the arbiter and be lost: the stop would then wait out
        # graceful_timeout (30 s) and SIGKILL this worker. Remember it instead: with `alive`
        # false the worker boots, serves nothing and exits. One that came between the fork
        # and here went to the inherited handler: into this process's copy of its queue.
        inherited = signal.signal(signal.SIGTERM, self.exit_while_booting)
        if stop_queued(inherited):
            self.alive = False
        limits: BodyLimits = self.app.body_limits
        self.body_timeout = limits.timeout_seconds
        self.max_body_bytes = limits.max_bytes
        self.waiting: dict[Any, gevent.Timeout] = {}
        super().init_process()

    def exit_while_booting(self, sig: int, frame: FrameType | None) -> None:
        self.alive = False

    @contextmanager
    def timeout_ctx(self) -> Iterator[None]:
        """The wait for a connection's next request (gunicorn's keep-alive loop), silent on
        timeout: the connection is then closed."""
        timeout = gevent.Timeout(self.cfg.keepalive, False)
        waiter = gevent.getcurrent()
        self.waiting[waiter] = timeout
        try:
            with timeout:
                yield
        finally:
            self.waiting.pop(waiter, None)

    def handle_exit(self, sig: Any, frame: Any) -> None:
        super().handle_exit(sig, frame)
        # Idle keep-alive connections would otherwise hold the stop for the whole keepalive.
        gevent.spawn_later(STOP_LINGER_SECONDS, self.end_waits)

    def end_waits(self) -> None:
        """Fire the timeout of every connection still waiting for a request."""
        loop = gevent.get_hub().loop
        for waiter, timeout in list(self.waiting.items()):
            loop.run_callback(waiter.throw, timeout)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> Any:
        try:
            self.buffer_body(req)
        except (BodyTimeoutError, errors.ParseException) as exc:
            self.handle_error(req, sock, addr, exc)
            raise StopIteration from exc
        answer = HeadWithBody(sock)
        try:
            return super().handle_request(listener_name, req, answer, addr)
        finally:
            answer.flush()

    def buffer_body(self, req: Any) -> None:
        """Read the body (at most the cap + 1 byte) before the app runs: the app then never
        waits on a socket. A body over the cap, or one announced over it, is left unread and
        the connection closes after the app's 413."""
        length = next((value for name, value in req.headers if name == "CONTENT-LENGTH"), None)
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            req.must_close = True
            return
        with gevent.Timeout(self.body_timeout, BodyTimeoutError):
            data = req.body.read(self.max_body_bytes + 1)
        if len(data) > self.max_body_bytes:
            req.must_close = True
        req.body = io.BytesIO(data)

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        """gunicorn's HTML error page and its 'Invalid request from ip=...' line, replaced."""
        status, field, reason = error_answer(exc)
        if status == 500:
            # A bug: where it happened (frames, not the message, which could quote the request).
            frames = "".join(traceback.format_tb(exc.__traceback__))
            log_event("unexpected", type=type(exc).__name__, at=frames)
        else:
            log_event("rejected", status=status, error=type(exc).__name__)
        try:
            client.sendall(json_response(status, field, reason))
            linger(client)
        except OSError:
            pass  # the client is gone; nothing to answer


class HeadWithBody:
    """The socket gunicorn answers a request on, sending its header block together with the
    body's first bytes: one send() and one TCP segment instead of two. A loopback send()
    costs about 70 µs of CPU on a 2-core VM (benchmarks/README.md, "The collector against a
    bare Flask app"), a sixth of a single-report request.

    gunicorn writes its header block with the response's first sendall (an early-hints
    block, if any, comes first too: order is kept); that write is held and goes out with
    the next one. Anything else done with the socket (send, sendfile, shutdown, close)
    sends what is held first, and so does `flush` once the request is answered."""

    __slots__ = ("_first", "_held", "_sock")

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._held = b""
        self._first = True

    def sendall(self, data: Any, flags: int = 0) -> None:
        if self._first:
            self._first, self._held = False, bytes(data)
            return
        held, self._held = self._held, b""
        self._sock.sendall(held + data if held else data, flags)

    def flush(self) -> None:
        """Send what is held; a client already gone is not an error here (gunicorn's own
        handling of the connection sees it)."""
        held, self._held = self._held, b""
        if held:
            with suppress(OSError):
                self._sock.sendall(held)

    def __getattr__(self, name: str) -> Any:
        self.flush()
        return getattr(self._sock, name)


def linger(client: Any) -> None:
    """Close after the answer, but first read what the client is still sending (a little, for
    a second): closing with unread bytes resets the connection, and the client would lose
    the answer."""
    client.shutdown(socket.SHUT_WR)
    drained = 0
    with gevent.Timeout(_LINGER_SECONDS, False):
        while drained < _LINGER_BYTES:
            data = client.recv(_CHUNK)
            if not data:
                break
            drained += len(data)
