"""The README's walk-through, run as written and in order: "Run the services" then "Read a
report", in a fresh directory (only the port is changed, to a free one)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from deploy_kit import ROOT

from ldptel.store.redis_server import free_port


def readme_block(title: str) -> str:
    """The bash block under a README heading."""
    section = ROOT.joinpath("README.md").read_text().split(f"### {title}", 1)[1]
    [block] = re.findall(r"```bash\n(.*?)```", section.split("\n### ", 1)[0], re.DOTALL)
    return block


@pytest.mark.slow
def test_the_readme_walk_through_works_in_order(tmp_path: Path) -> None:
    script = readme_block("Run the services (operators)") + readme_block(
        "Read a report (analysts, operators)"
    )
    script = script.replace("8080", str(free_port()))
    # Should a command fail, stop the background collector too (the README's `kill %1`).
    script = "trap 'kill $(jobs -p) 2>/dev/null' EXIT\n" + script
    for name in (".venv", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    env = {key: value for key, value in os.environ.items() if not key.startswith("LDPTEL_")}
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    assert process.returncode == 0, err[-3000:]
    assert "300 installs reported their color" in out
    assert "n = 300" in out  # the table
    assert "oracle sw" in out and "worst-case stderr" in out and "quantiles: q0.05" in out
    assert (tmp_path / "colors.html").read_text().count("colors") > 0
    rows = (tmp_path / "colors.csv").read_text().splitlines()
    assert rows[0].startswith("campaign,") and len(rows) == 1 + 8  # the header, 8 colors
    # The collector's JSON logs went to its file, not through the walk-through's output.
    collector_log = (tmp_path / "collector.log").read_text()
    assert '"logger":"gunicorn.error"' in collector_log and '"logger":"gunicorn' not in err
    assert not (tmp_path / ".ldptel" / "redis.url").exists()  # the collector stopped cleanly
