"""Run the real `ldptel` command (a subprocess, as a user would) and read what it printed."""

from __future__ import annotations

import subprocess
import sys


def ldptel(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m ldptel.cli ARGS` with captured text output."""
    return subprocess.run(
        [sys.executable, "-m", "ldptel.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def one_line_error(result: subprocess.CompletedProcess[str], command: str, field: str) -> str:
    """Assert a parameter error: exit 2, nothing on stdout, one stderr line naming `field`."""
    assert result.returncode == 2, result
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"ldptel {command}: error: {field}:"), lines[0]
    return lines[0]
