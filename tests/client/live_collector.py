"""A real collector (real HTTP, real Redis) that tests can stop, restart on the same port and
make misbehave, recording every request body it receives; and a reader of what Redis holds."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from collector_api import Api, ServerThread, campaign_config, collector_app
from waiting import DEADLINE_SECONDS, scaled, wait_for

from ldptel.client.campaign import CampaignConfig
from ldptel.store import keys

Environ = dict[str, Any]
StartResponse = Callable[..., Any]


@dataclass
class Seen:
    """One request the collector received (body decompressed)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


#: Injected answers with the collector's JSON error body: status -> reason phrase.
INJECTED = {
    "400": "Bad Request",
    "401": "Unauthorized",
    "403": "Forbidden",
    "413": "Content Too Large",
    "429": "Too Many Requests",
    "503": "Service Unavailable",
}


@dataclass
class Faults:
    """WSGI middleware: records requests; `plan` holds the fate of the next POST /v1/reports
    ("503", "429", "lose" = store it but answer 503, "html" = a 200 captive-portal page, one
    of INJECTED's statuses with the collector's JSON error, "301" to "308" = a redirect to
    `location`, "404html" (any status) = a web server's HTML page), `always` the fate of
    every one while it is set, and `config_plan` the same for GET /v1/campaigns/...
    ("garbage"); POSTs for the campaigns in `unavailable` are always answered 503."""

    app: Any
    plan: list[str] = field(default_factory=list)
    always: str = ""
    location: str = ""
    config_plan: list[str] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    retry_after: str = "0"
    unavailable: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(raw)
        headers = {
            k[5:].replace("_", "-").title(): v for k, v in environ.items() if k[:5] == "HTTP_"
        }
        body = gzip.decompress(raw) if headers.get("Content-Encoding") == "gzip" else raw
        path, method = environ["PATH_INFO"], environ["REQUEST_METHOD"]
        with self.lock:
            self.seen.append(Seen(method, path, headers, body, time.monotonic()))
            plan: list[str] = []
            if path == "/v1/reports":
                plan = self.plan
            elif method == "GET" and path.startswith("/v1/campaigns/"):
                plan = self.config_plan
            action = plan.pop(0) if plan else ""
            if path == "/v1/reports":
                action = action or self.always
                if self._campaign(body) in self.unavailable:
                    action = "503"
        if action == "lose":
            for _ in self.app(environ, lambda *a, **k: None):
                pass
            action = "503"
        if action in INJECTED:
            start_response(
                f"{action} {INJECTED[action]}",
                [("Content-Type", "application/json"), ("Retry-After", self.retry_after)],
            )
            return [b'{"error": {"field": "test", "reason": "injected"}}']
        if action in ("301", "302", "303", "307", "308"):
            start_response(f"{action} Redirect", [("Location", self.location)])
            return [b""]
        if action in ("html", "garbage"):
            start_response("200 OK", [("Content-Type", "text/html")])
            return [b"<html>Welcome to the hotel wifi</html>"]
        if action[:3].isdigit() and action[3:] == "html":  # "404html": a web server's page
            start_response(f"{action[:3]} Not Ours", [("Content-Type", "text/html")])
            return [b"<html><h1>%s</h1>nginx</html>" % action[:3].encode()]
        return self.app(environ, start_response)  # type: ignore[no-any-return]

    @staticmethod
    def _campaign(body: bytes) -> object:
        try:
            return json.loads(body).get("campaign")
        except (ValueError, AttributeError):
            return None

    def posted(self) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if s.path == "/v1/reports"]


class LiveCollector:
    """The collector on a fixed port (so a restarted one has the same URL)."""

    def __init__(self, redis_url: str) -> None:
        self.faults = Faults(collector_app({"redis_url": redis_url}))
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api = Api(self.url)
        self.server: ServerThread | None = None
        self.start()

    def start(self) -> None:
        self.server = ServerThread(self.faults, self.port)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def campaign(self, name: str = "colors", **changes: Any) -> CampaignConfig:
        """Create (or update) a campaign; returns its config. Every report is charged under
        the default memoization, so campaigns get a lifetime budget that delivery tests do
        not reach, unless they set one."""
        data = campaign_config(name, **{"lifetime_epsilon": 1e6, **changes})
        config_id = self.api.create_campaign(data)
        config = CampaignConfig.from_dict(data).as_created()  # as the collector stores it
        assert config.config_id == config_id
        return config


def stored_reports(redis: Any, config: CampaignConfig) -> list[dict[str, Any]]:
    """Every report Redis holds for the campaign, decoded back to its wire form."""
    oracle = config.build_mechanism()
    reports: list[dict[str, Any]] = []
    for shard in range(config.shards):
        for _, entry in redis.xrange(keys.stream(config.name, shard)):
            n = int(entry[b"n"])
            reports.extend(oracle.encode(oracle.unpack(entry[b"p"], n)))
    return reports


def sent_reports(seen: list[Seen]) -> dict[str, list[dict[str, Any]]]:
    """Idempotency key -> the reports of the batch posted under it."""
    return {s.headers["Idempotency-Key"]: json.loads(s.body)["reports"] for s in seen}


def canonical(reports: Iterable[dict[str, Any]]) -> list[str]:
    """Reports as sorted JSON strings, to compare multisets."""
    return sorted(json.dumps(r, sort_keys=True) for r in reports)


class SilentServer:
    """Accepts connections and reads each request's head, never answers: a collector that
    hangs. `heads` holds the headers of every request it read (lower-case names). With
    `tls`, it speaks HTTPS."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.listener.getsockname()[1]}"
        self.tls = tls
        self.heads: list[dict[str, str]] = []
        self._open: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed
                return
            self._open.append(conn)
            threading.Thread(target=self._read_head, args=(conn,), daemon=True).start()

    def _read_head(self, conn: socket.socket) -> None:
        data = b""
        with contextlib.suppress(OSError):
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
        lines = data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
        fields = (line.partition(":") for line in lines[1:])
        self.heads.append({name.strip().lower(): value.strip() for name, _, value in fields})
        self.answer(conn)

    def answer(self, conn: socket.socket) -> None:
        """What is sent once a request's head is read: nothing (the connection stays open)."""

    def wait_for_request(self, count: int = 1, timeout: float = DEADLINE_SECONDS) -> dict[str, str]:
        """The head of the count-th request, once it has been read."""
        wait_for(lambda: len(self.heads) >= count, f"request {count} reached the server", timeout)
        return self.heads[count - 1]

    def close(self) -> None:
        self.listener.close()
        for conn in self._open:
            conn.close()


#: How far past its timeout a client may still be seen giving up on a trickling answer: a
#: loaded machine delays the check by seconds, while a per-read timeout (which a byte every
#: `interval` never trips) would wait out the whole answer, 4,096 bytes: >= 2,048 s.
SLACK_SECONDS = scaled(10.0)


class TrickleServer(SilentServer):
    """Answers every request slowly: `head_at_once` bytes of a 200 config answer at once, then
    the rest one byte every `interval` seconds (a collector, or a proxy, that trickles).
    `closed` holds, per connection, how long after its request head the client closed it."""

    ANSWER = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n"
        + b"{%s}" % (b" " * 4094)
    )

    def __init__(
        self, head_at_once: int = 0, interval: float = 1.0, tls: ssl.SSLContext | None = None
    ) -> None:
        self.head_at_once = head_at_once
        self.interval = interval
        self.closed: list[float] = []
        super().__init__(tls)

    def answer(self, conn: socket.socket) -> None:
        started = time.monotonic()
        with contextlib.suppress(OSError):
            conn.sendall(self.ANSWER[: self.head_at_once])
            for i in range(self.head_at_once, len(self.ANSWER)):
                readable, _, _ = select.select([conn], [], [], self.interval)
                if readable and not conn.recv(65536):  # the client gave up: closed
                    self.closed.append(time.monotonic() - started)
                    return
                conn.sendall(self.ANSWER[i : i + 1])
