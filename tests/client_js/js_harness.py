"""The TypeScript client's test harness: the package built (npm ci from the lockfile, tsc),
a real collector (real HTTP, real Redis) that pages may reach through CORS, and node runs.
(A module of its own name: `from conftest import` would find another folder's conftest.)"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from collector_api import Api, ServerThread, collector_app

CLIENT_JS = Path(__file__).parents[2] / "client-js"
NODE = shutil.which("node")


def _stale(built: Path, sources: Path) -> bool:
    if not built.exists():
        return True
    newest = max(p.stat().st_mtime for p in sources.rglob("*.ts"))
    return built.stat().st_mtime < newest


def build_client_js() -> Path:
    """client-js/, with node_modules (npm ci) and dist/ (tsc) up to date."""
    if NODE is None or shutil.which("npm") is None:
        pytest.fail("node and npm are required for the TypeScript client's tests")
    if not (CLIENT_JS / "node_modules").exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=CLIENT_JS, check=True)
    if _stale(CLIENT_JS / "dist" / "src" / "index.js", CLIENT_JS / "src"):
        subprocess.run(["npm", "run", "build"], cwd=CLIENT_JS, check=True)
    return CLIENT_JS


class Collector:
    """A collector serving `settings` on a free port, with an admin Api."""

    def __init__(self, redis_url: str, **settings: Any) -> None:
        self.server = ServerThread(collector_app({"redis_url": redis_url, **settings}))
        self.url = self.server.url
        self.api = Api(self.url)


def run_node(script: Path, *args: str, timeout: float = 120) -> str:
    """Run a node script of client-js; its stdout (a failure shows its stderr)."""
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(script), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
