"""The README's walk-through, run as written and in order: "Run the services" then "Read a
report", in a fresh directory (only the port is changed, to a free one), with the docs'
commands that need the running collector before the README's last line stops it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from deploy_kit import ROOT

from ldptel.store.redis_server import free_port


def readme_block(title: str) -> str:
    """The bash block under a README heading."""
    section = ROOT.joinpath("README.md").read_text().split(f"### {title}", 1)[1]
    [block] = re.findall(r"```bash\n(.*?)```", section.split("\n### ", 1)[0], re.DOTALL)
    return block


def doc_blocks(name: str, heading: str) -> str:
    """The bash blocks of a docs/ section (up to the next heading of any level)."""
    section = ROOT.joinpath("docs", name).read_text().split(f"\n{heading}\n", 1)[1]
    return "".join(re.findall(r"```bash\n(.*?)```", re.split(r"\n#+ ", section)[0], re.DOTALL))


def run_script(script: str, folder: Path) -> tuple[int, str, str]:
    """Run a walk-through in `folder` (its .venv and examples linked), as bash -euo pipefail
    with no LDPTEL_* variables from the test's environment; (exit status, stdout, stderr)."""
    script = script.replace("8080", str(free_port()))
    # Should a command fail, stop the background collector too (the README's `kill %1`).
    script = "trap 'kill $(jobs -p) 2>/dev/null' EXIT\n" + script
    for name in (".venv", "examples"):
        (folder / name).symlink_to(ROOT / name)
    env = {key: value for key, value in os.environ.items() if not key.startswith("LDPTEL_")}
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script], cwd=folder, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    return process.returncode, out, err


#: Doc commands that never end (services) or need another Redis: run elsewhere, or parsed
#: only (test_doc_commands.py).
NOT_HERE = re.compile(r"--every|\$URL|redis://")


def docs_commands() -> str:
    """The docs' commands that need the README's running collector: docs/aggregator.md's
    "Running it" and "Reading reports", docs/operations.md's alerts, pruning and token and
    campaign sections, docs/collector.md's "Campaigns" (its retire last), each as written but
    the placeholder CAMPAIGN (colors) and May 2024's window (today's, where the data is)."""
    today = time.strftime("%Y-%m-%d", time.gmtime())
    return "\n".join([
        "\n".join(line for line in doc_blocks("aggregator.md", "## Running it (operators)")
                  .splitlines() if not NOT_HERE.search(line)),
        doc_blocks("aggregator.md", "## Reading reports (analysts)"),
        "\n".join(line for line in doc_blocks("operations.md", "## Alerts").splitlines()
                  if not line.startswith(("LDPTEL_", "    "))),
        doc_blocks("operations.md", "### Capacity").replace("CAMPAIGN", "colors"),
        doc_blocks("operations.md", "## Managing tokens and campaigns"),
        doc_blocks("collector.md", "## Campaigns"),
    ]).replace("2024-05-01", today)  # fmt: skip


@pytest.mark.slow
def test_the_readme_walk_through_works_in_order(tmp_path: Path) -> None:
    read = readme_block("Read a report (analysts, operators)")
    [stop] = [line for line in read.splitlines() if line.startswith("kill %1")]
    # The docs' commands run before the README's last line stops the collector.
    script = readme_block("Run the services (operators)") + read.replace(stop, docs_commands())
    returncode, out, err = run_script(script + stop + "\n", tmp_path)
    assert returncode == 0, err[-3000:]
    assert "300 installs reported their color" in out
    assert "n = 300" in out  # the table
    assert "oracle sw" in out and "worst-case stderr" in out and "quantiles: q0.05" in out
    assert (tmp_path / "colors.html").read_text().count("colors") > 0
    rows = (tmp_path / "colors.csv").read_text().splitlines()
    assert rows[0].startswith("campaign,") and len(rows) == 1 + 8  # the header, 8 colors
    # The docs' commands: a second pass finds nothing new; prune keeps today's window; the
    # README's token and the doc's, both of app myapp, revoked; the Parquet file written.
    assert "aggregated 0 reports" in out and '"deleted": 0' in out
    assert "revoked 2 tokens" in out and "retired colors" in out
    assert (tmp_path / "colors.parquet").stat().st_size > 0
    # The collector's JSON logs went to its file, not through the walk-through's output.
    collector_log = (tmp_path / "collector.log").read_text()
    assert '"logger":"gunicorn.error"' in collector_log and '"logger":"gunicorn' not in err
    assert not (tmp_path / ".ldptel" / "redis.url").exists()  # the collector stopped cleanly
