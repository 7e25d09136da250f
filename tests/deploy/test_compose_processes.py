"""deploy/compose.yaml, run for real without a container engine: each service's exact command
line (the image's `ldptel` entrypoint, the service's command) as a local process with the
service's environment. Only what a container network provides is mapped: the host `redis` and
the ports become loopback and free ports, /run/secrets becomes a directory of this test, and
the intervals shrink from minutes to a second. Redis is a private redis-server started with
the compose Redis's own arguments.

Then the services work together: a batch posted to the collector reaches a window report
built by the aggregator (served by the collector), the report job's HTML page and the systemd
report unit's page and CSV; every line
the services log is JSON with time, level and logger, and no token is ever logged."""

from __future__ import annotations

import csv
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from deploy_kit import DEPLOY, ROOT, compose, unit_settings
from waiting import wait_for

from ldptel.store.redis_server import find_redis_server, free_port

BIN = Path(sys.executable).parent
REPORTS = 150


@dataclass
class Stack:
    """Where the mapped services live."""

    redis_port: int
    collector_port: int
    health_port: int
    secrets: Path
    reports: Path

    def environment(self, service: str) -> dict[str, str]:
        """The service's compose environment, mapped to this machine."""
        mapped = {
            "LDPTEL_HOST": "127.0.0.1",
            "LDPTEL_PORT": str(self.collector_port),
            "LDPTEL_AGGREGATOR_HEALTH_HOST": "127.0.0.1",
            "LDPTEL_AGGREGATOR_HEALTH_PORT": str(self.health_port),
            "LDPTEL_AGGREGATOR_EVERY": "1s",
            "REPORT_EVERY": "1",
            "REPORT_DIR": str(self.reports),
        }
        env = {}
        for name, value in compose()["services"][service].get("environment", {}).items():
            value = mapped.get(name, str(value))
            value = value.replace("redis://redis:6379", f"redis://127.0.0.1:{self.redis_port}")
            env[name] = value.replace("/run/secrets/", f"{self.secrets}/")
        # A clean process environment: no LDPTEL_* of the machine running the tests.
        return {"PATH": f"{BIN}{os.pathsep}/usr/bin:/bin", "HOME": str(self.secrets), **env}

    def command(self, service: str) -> list[str]:
        """The image's entrypoint (`ldptel`) or the service's, then its command ($$ is $)."""
        spec = compose()["services"][service]
        entrypoint = spec.get("entrypoint", ["ldptel"])
        return [*entrypoint, *(part.replace("$$", "$") for part in spec["command"])]

    def healthcheck(self, service: str) -> list[str]:
        test = compose()["services"][service]["healthcheck"]["test"]
        assert test[0] == "CMD"
        ports = {"8080": str(self.collector_port), "9464": str(self.health_port)}
        return [
            sys.executable if word == "python" else _replace_all(word, ports) for word in test[1:]
        ]


def _replace_all(text: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        text = text.replace(old, new)
    return text


def wait_while_running(condition: Callable[[], bool], what: str, processes: list[Any]) -> None:
    """Poll `condition` until it holds (waiting.wait_for); a service exiting meanwhile fails."""

    def holds() -> bool:
        for process in processes:
            assert process.poll() is None, f"{process.args[:3]} exited while waiting for {what}"
        return condition()

    wait_for(holds, what)


@pytest.fixture
def stack(tmp_path: Path) -> Stack:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "admin_token").write_text("compose-admin-token-5f1c2d\n")
    (secrets / "analyst_token").write_text("compose-analyst-token-9a7b3e\n")
    (tmp_path / "reports").mkdir()
    return Stack(free_port(), free_port(), free_port(), secrets, tmp_path / "reports")


@pytest.fixture
def redis_service(stack: Stack, tmp_path: Path) -> Iterator[Any]:
    """redis-server with the compose service's arguments, on loopback."""
    import redis

    command = compose()["services"]["redis"]["command"]
    assert command[0] == "redis-server"
    data = tmp_path / "redis"
    data.mkdir()
    process = subprocess.Popen(
        [find_redis_server(), *command[1:], "--port", str(stack.redis_port), "--bind",
         "127.0.0.1", "--dir", str(data)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(port=stack.redis_port)
    try:
        wait_while_running(lambda: _pings(client), "redis", [process])
        yield client
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=30)


def _pings(client: Any) -> bool:
    import redis

    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def start(stack: Stack, service: str, log_dir: Path) -> subprocess.Popen[bytes]:
    log = (log_dir / f"{service}.log").open("wb")
    return subprocess.Popen(
        stack.command(service), env=stack.environment(service), cwd=log_dir,
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def healthy(stack: Stack, service: str) -> bool:
    check = subprocess.run(stack.healthcheck(service), capture_output=True, timeout=30, check=False)
    return check.returncode == 0


def run_the_systemd_report_unit(redis_service: Any, tmp_path: Path) -> None:
    """ldptel-report@colors.service's commands as systemd runs them (%i the campaign, %S the
    state root), with the settings file's Redis URL: the page and the CSV are written."""
    unit = DEPLOY / "systemd" / "ldptel-report@.service"
    state = tmp_path / "state"
    (state / "ldptel-report").mkdir(parents=True)  # StateDirectory=
    port = redis_service.connection_pool.connection_kwargs["port"]
    env = {
        "PATH": f"{BIN}{os.pathsep}/usr/bin:/bin",
        "LDPTEL_REDIS_URL": f"redis://127.0.0.1:{port}",
    }
    for exec_start in unit_settings(unit)["ExecStart"]:
        line = exec_start.replace("%i", "colors").replace("%S", str(state))
        command = ["ldptel", *shlex.split(line)[1:]]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60,
                              check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
    written = state / "ldptel-report"
    assert "<svg" in (written / "colors-latest.html").read_text()
    rows = list(csv.DictReader((written / "colors-latest.csv").open()))
    assert {row["n"] for row in rows} == {str(REPORTS)} and len(rows) == 8


@pytest.mark.slow
def test_the_compose_services_work_together(
    stack: Stack, redis_service: Any, tmp_path: Path
) -> None:
    settings = redis_service.config_get("appendonly") | redis_service.config_get("maxmemory-*")
    assert (settings["appendonly"], settings["maxmemory-policy"]) == ("yes", "noeviction")

    processes: list[subprocess.Popen[bytes]] = []
    try:
        collector = start(stack, "collector", tmp_path)
        processes.append(collector)
        wait_while_running(
            lambda: healthy(stack, "collector"), "the collector's healthcheck", processes
        )

        # An operator registers the campaign inside the collector's container.
        created = subprocess.run(
            ["ldptel", "collector", "campaign", "create", str(ROOT / "examples" / "colors.json")],
            env=stack.environment("collector"), capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        config_id = json.loads(created.stdout)["config_id"]
        url = f"http://127.0.0.1:{stack.collector_port}"
        admin = {"Authorization": "Bearer compose-admin-token-5f1c2d"}  # from the secret file
        token = requests.post(f"{url}/v1/tokens", json={"app": "shop"}, headers=admin, timeout=10)
        assert token.status_code == 201, token.text
        posted = requests.post(
            f"{url}/v1/reports",
            json={"campaign": "colors", "config_id": config_id,
                  "reports": [{"y": i % 8} for i in range(REPORTS)]},
            headers={"Authorization": f"Bearer {token.json()['token']}",
                     "Idempotency-Key": "compose-batch-1"},
            timeout=10,
        )  # fmt: skip
        assert posted.status_code == 202, posted.text
        [(_, entry)] = redis_service.xrange("ldptel:{colors:0}:reports")
        window = int(entry[b"w"])

        for service in ("aggregator", "report"):
            processes.append(start(stack, service, tmp_path))
        wait_while_running(
            lambda: healthy(stack, "aggregator"), "the aggregator's healthcheck", processes
        )

        analyst = {"Authorization": "Bearer compose-analyst-token-9a7b3e"}

        def report_built() -> bool:
            answer = requests.get(f"{url}/v1/campaigns/colors/reports/{window}", headers=analyst,
                                  timeout=10)  # fmt: skip
            counts = [r["n"] for r in answer.json().get("reports", [])]
            return answer.status_code == 200 and counts == [REPORTS]

        wait_while_running(report_built, "the window report", processes)
        run_the_systemd_report_unit(redis_service, tmp_path)
        page = stack.reports / "colors-latest.html"
        wait_while_running(
            lambda: page.exists() and "colors" in page.read_text(), "the HTML page", processes
        )

        def pass_exported() -> bool:  # the pass ends (metrics) just after its reports are stored
            health = f"http://127.0.0.1:{stack.health_port}/metrics"
            metrics = requests.get(health, timeout=10).text
            return 'ldptel_aggregator_lag_entries{campaign="colors",shard="0"} 0.0' in metrics

        wait_while_running(pass_exported, "the pass's metrics", processes)
        metrics = requests.get(f"http://127.0.0.1:{stack.health_port}/metrics", timeout=10).text
        assert "ldptel_aggregator_entries_applied_total 1.0" in metrics
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        codes = [process.wait(timeout=60) for process in processes]
    assert codes[:2] == [0, 0]  # collector and aggregator stop cleanly on SIGTERM

    for service in ("collector", "aggregator"):
        text = (tmp_path / f"{service}.log").read_text()
        assert "compose-admin-token" not in text and "compose-analyst-token" not in text
        lines = [json.loads(line) for line in text.splitlines()]
        assert all({"time", "level", "logger"} <= set(line) for line in lines), service
        assert any("listening on http://127.0.0.1:" in line.get("message", "") for line in lines)
