"""`ldptel dashboard` as a user runs it: serves on loopback until SIGTERM, and refuses to bind
beyond loopback without the analyst token."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import pytest
import requests
from ldptel_command import ldptel, one_line_error


def test_beyond_loopback_it_needs_the_analyst_token(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LDPTEL_ANALYST_TOKEN", raising=False)
    done = ldptel("dashboard", "--host", "0.0.0.0", "--redis-url", redis_url)
    one_line_error(done, "dashboard", "host")


def test_it_serves_until_sigterm(redis_client: object, redis_url: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "ldptel.cli", "dashboard", "--port", "0", "--redis-url", redis_url],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        url = re.search(r"http://\S+/", line)
        assert url, line
        page = requests.get(url.group(0), timeout=30)
        assert page.status_code == 200 and "No campaigns yet." in page.text
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
