"""A total deadline for one HTTP request made with requests: connect, every read of the
answer's head and body, whatever the server sends and however slowly.

requests' timeout is per socket operation (a server trickling a byte a second never trips a
read timeout), so a timer shuts the request's connection down when the deadline passes; the
blocked read then fails and the request raises DeadlinePassed. The connection classes below
tell the request in progress on their thread which connection it uses (new or pooled).
"""

from __future__ import annotations

import contextlib
import contextvars
import socket
import threading
import time
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection


class DeadlinePassed(requests.Timeout):
    """The call's total deadline passed before its answer was complete."""


class _Call:
    """One request under a total deadline: the connections it uses, shut down when the
    deadline passes (that wakes a read blocked on them; the request then raises)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connections: list[HTTPConnection] = []
        self.expired = False
        self._done = False

    def watch(self, connection: HTTPConnection) -> None:
        with self._lock:
            if self.expired:
                _shut(connection)
            elif not self._done:
                self._connections.append(connection)

    def expire(self) -> None:
        with self._lock:
            if self._done:  # the answer came first: its connection is back in the pool
                return
            self.expired = True
            for connection in self._connections:
                _shut(connection)

    def finish(self) -> None:
        with self._lock:
            self._done = True


def _shut(connection: HTTPConnection) -> None:
    sock = getattr(connection, "sock", None)
    raw = sock if isinstance(sock, socket.socket) else getattr(sock, "socket", None)
    if isinstance(raw, socket.socket):
        # socket.socket's own shutdown: SSLSocket's would also drop its TLS state. An
        # OSError: the connection is closed already.
        with contextlib.suppress(OSError):
            socket.socket.shutdown(raw, socket.SHUT_RDWR)


#: The request in progress on this thread (urllib3 uses the connection on the caller's).
_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("ldptel_call", default=None)


def _watch(connection: HTTPConnection) -> None:
    call = _CALL.get()
    if call is not None:
        call.watch(connection)


class _WatchedHTTPConnection(HTTPConnection):
    """A connection the current call's deadline can shut down (new or from the pool)."""

    def connect(self) -> None:
        super().connect()
        _watch(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        _watch(self)
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(_WatchedHTTPConnection, HTTPSConnection):
    """The same over TLS (the MRO puts HTTPSConnection's connect under the watch)."""


class _WatchedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


_POOLS = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}


class _WatchedAdapter(HTTPAdapter):
    """requests' adapter with connections a deadline can shut down (also through an HTTP
    proxy; a SOCKS proxy's connections keep urllib3's own classes, per-read timeouts)."""

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any
    ) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):
            manager.pool_classes_by_scheme = _POOLS
        return manager


def new_session() -> requests.Session:
    """A requests.Session whose connections send_before's deadline can shut down."""
    session = requests.Session()
    adapter = _WatchedAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def send_before(
    deadline: float,
    session: requests.Session,
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes | None,
) -> requests.Response:
    """One request (redirects not followed), its answer read whole, before `deadline`
    (time.monotonic()), or DeadlinePassed: a timer shuts its connection down at the
    deadline, whatever it is waiting for."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlinePassed()
    call = _Call()
    current = _CALL.set(call)
    timer = threading.Timer(left, call.expire)
    timer.name, timer.daemon = "ldptel-deadline", True
    timer.start()
    try:
        return session.request(
            method,
            url,
            headers=headers,
            data=body,
            timeout=(left, left),
            allow_redirects=False,
        )
    except requests.RequestException as error:
        if call.expired:
            raise DeadlinePassed() from error
        raise
    finally:
        call.finish()
        timer.cancel()
        _CALL.reset(current)
