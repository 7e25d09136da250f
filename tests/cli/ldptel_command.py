"""Run the real `ldptel` command (a subprocess, as a user would) and read what it printed,
from pipes or from a terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator


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


def open_terminal() -> tuple[int, int]:
    """A pseudo-terminal of 100 x 30 (pty module): (our end, the end a command writes to)."""
    ours, theirs = pty.openpty()
    fcntl.ioctl(theirs, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    return ours, theirs


def terminal_chunks(ours: int) -> Iterator[str]:
    """What a command wrote to the terminal, chunk by chunk, until its end is closed (Linux
    reports that as EIO); progress bars redraw with \\r, so read chunks, not lines."""
    while True:
        try:
            chunk = os.read(ours, 4096)
        except OSError:
            return
        if not chunk:
            return
        yield chunk.decode(errors="replace")


def ldptel_on_a_terminal(*args: str, timeout: float = 120) -> tuple[str, str]:
    """Run `ldptel ARGS` with stderr on a terminal and stdout a pipe: (stdout, terminal)."""
    ours, theirs = open_terminal()
    with subprocess.Popen(
        [sys.executable, "-m", "ldptel.cli", *args], stdout=subprocess.PIPE, stderr=theirs
    ) as process:
        os.close(theirs)
        terminal = "".join(terminal_chunks(ours))  # ends when the command exits
        stdout, _ = process.communicate(timeout=timeout)
    os.close(ours)
    assert process.returncode == 0, terminal
    return stdout.decode(), terminal
