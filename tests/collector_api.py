"""A real collector over real HTTP (werkzeug's threaded server on a free port), and a small
client for its API (shared by tests/collector and tests/client)."""

from __future__ import annotations

import subprocess
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import requests
from waiting import wait_for
from werkzeug.serving import BaseWSGIServer, make_server

from ldptel.collector import create_app

ADMIN_TOKEN = "test-admin-token-0123456789"
DOMAIN = ["red", "green", "blue", "cyan", "pink"]


def campaign_config(name: str = "colors", **changes: Any) -> dict[str, Any]:
    return {"name": name, "oracle": "de", "epsilon": 1.0, "domain": DOMAIN, **changes}


@dataclass
class Api:
    """The collector's URL with the calls tests make most."""

    url: str
    session: requests.Session = field(default_factory=requests.Session)

    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    def create_campaign(self, config: Mapping[str, Any] | None = None) -> str:
        response = self.session.post(
            f"{self.url}/v1/campaigns", json=dict(config or campaign_config()), headers=self.admin()
        )
        assert response.status_code in (200, 201), response.text
        return str(response.json()["config_id"])

    def create_token(self, app: str = "testapp") -> str:
        response = self.session.post(
            f"{self.url}/v1/tokens", json={"app": app}, headers=self.admin()
        )
        assert response.status_code == 201, response.text
        return str(response.json()["token"])

    def post_reports(
        self,
        token: str,
        body: Any,
        *,
        key: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> requests.Response:
        sent = {
            "Authorization": f"Bearer {token}",
            "Idempotency-Key": key or uuid.uuid4().hex,
            **(headers or {}),
        }
        return self.session.post(f"{self.url}/v1/reports", json=body, headers=sent)


class ServerThread:
    """The app served by werkzeug in a background thread."""

    def __init__(self, app: Any, port: int = 0) -> None:
        self.server: BaseWSGIServer = make_server("127.0.0.1", port, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def wait_until_up(url: str, process: subprocess.Popen[bytes]) -> None:
    """Wait until a collector started as a subprocess answers /readyz; the probing
    connection is closed (left open, it would hold the graceful stop for the keep-alive
    timeout)."""

    def ready() -> bool:
        assert process.poll() is None, "the collector exited at start"
        try:
            with requests.Session() as session, session.get(f"{url}/readyz", timeout=5) as answer:
                return answer.status_code == 200
        except requests.RequestException:  # not listening yet, or a worker still booting
            return False

    wait_for(ready, "the collector answers /readyz", interval=0.1)


def collector_app(settings: Mapping[str, Any]) -> Any:
    """The collector app with the tests' admin token and no rate limit."""
    # No refusal delay: the tests send refusals by the thousand (test_refusal_delay.py has it).
    settings = {"rate_limit": 0, "refusal_delay_seconds": 0, **settings}
    return create_app({"admin_token": ADMIN_TOKEN, **settings})


def serve(settings: Mapping[str, Any]) -> ServerThread:
    return ServerThread(collector_app(settings))


def batch(config_id: str, values: list[int], name: str = "colors") -> dict[str, Any]:
    return {"campaign": name, "config_id": config_id, "reports": [{"y": v} for v in values]}
