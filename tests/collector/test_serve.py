"""`ldptel collector serve` for real: gunicorn workers, the private redis-server, the token
and campaign commands, multiprocess metrics, and a graceful stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from collector_api import DOMAIN, batch, wait_until_up

from ldptel.store.redis_server import free_port


def ldptel(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ldptel.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
def test_serve_with_private_redis_then_stop_gracefully(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "LDPTEL_ADMIN_TOKEN": "serve-admin-token-123456"}
    env.pop("LDPTEL_REDIS_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "ldptel.cli", "collector", "serve", "--port", str(port),
         "--workers", "2"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_until_up(url, process)
        assert (tmp_path / ".ldptel" / "redis.url").exists()
        config_file = tmp_path / "colors.json"
        config_file.write_text(
            json.dumps({"name": "colors", "oracle": "de", "epsilon": 1.0, "domain": DOMAIN})
        )
        created = ldptel("collector", "campaign", "create", str(config_file), cwd=tmp_path)
        assert created.returncode == 0, created.stderr
        config_id = json.loads(created.stdout)["config_id"]
        made = ldptel("collector", "token", "create", "myapp", cwd=tmp_path)
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip()
        session = requests.Session()
        for i in range(20):
            response = session.post(
                f"{url}/v1/reports",
                json=batch(config_id, [i % 5, 1]),
                headers={"Authorization": f"Bearer {token}", "Idempotency-Key": f"k{i}"},
            )
            assert response.status_code == 202
        metrics = requests.get(f"{url}/metrics", timeout=5).text
        # Multiprocess mode: whichever worker answers, it reports all workers' counts.
        assert "ldptel_collector_reports_accepted_total 40.0" in metrics
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr.decode()
    assert not (tmp_path / ".ldptel" / "redis.url").exists()
    assert list((tmp_path / ".ldptel" / "redis").rglob("*.aof*"))


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from ldptel.cli.main import main

    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_without_redis_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LDPTEL_REDIS_URL", raising=False)
    status, _, err = cli(capsys, "collector", "token", "create", "app")
    assert status == 2
    assert "--redis-url" in err


def test_cli_token_and_campaign_commands(
    tmp_path: Path, redis_url: str, redis_client: object, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"name": "c", "oracle": "de", "epsilon": 1, "domain": DOMAIN}))
    redis = ("--redis-url", redis_url)
    status, out, _ = cli(capsys, "collector", "campaign", "create", str(config), *redis)
    assert status == 0 and json.loads(out)["changed"] is True
    status, out, _ = cli(capsys, "collector", "campaign", "create", str(config), *redis)
    assert json.loads(out)["changed"] is False
    _, token, _ = cli(capsys, "collector", "token", "create", "app", *redis)
    assert cli(capsys, "collector", "token", "revoke", token.strip(), *redis)[0] == 0
    assert cli(capsys, "collector", "token", "revoke", token.strip(), *redis)[0] == 2
    assert cli(capsys, "collector", "campaign", "retire", "c", *redis)[0] == 0
    assert cli(capsys, "collector", "campaign", "retire", "nope", *redis)[0] == 2
    status, _, err = cli(capsys, "collector", "token", "create", "Bad App", *redis)
    assert status == 2 and "app" in err
