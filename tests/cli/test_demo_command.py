"""`ldptel demo` at its edges: a tiny run, bad parameters, and Ctrl-C in the middle."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import requests
from ldptel_command import ldptel, one_line_error, open_terminal, terminal_chunks
from waiting import scaled, wait_for

#: The SDK stage's tqdm bar once it has counted a user (of 5,000, so far from done):
#: `users via the SDK     :  12%|█▎        | 600/5.00k [...]`.
SDK_PROGRESS = re.compile(r"users via the SDK *: *\d+%\|[^|]*\| *[1-9][\d.]*k?/5\.00k")


def test_a_tiny_demo_says_not_enough_reports_then_serves_the_dashboard(tmp_path: Path) -> None:
    # Two windows of 10 users, then the dashboard over them until SIGTERM.
    process = subprocess.Popen(
        [sys.executable, "-m", "ldptel.cli", "demo", "--n", "10", "--windows", "2",
         "--dashboard", "--html", str(tmp_path / "tiny.html")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        printed = []
        for line in process.stdout:
            printed.append(line)
            if line.startswith("Dashboard: "):
                break
        assert "n = 10 " in "".join(printed)
        assert "not enough reports: n = 10 < 100" in "".join(printed)
        assert "not enough reports" in (tmp_path / "tiny.html").read_text()
        page = requests.get(printed[-1].split()[1], params={"items": "home"}, timeout=30).text
        # Two windows marked as gaps, in each of the chart's two drawings (desktop, phone).
        assert page.count('<text class="gap"') == 2 * 2 and '<circle class="point"' not in page
        started = children(process.pid)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=scaled(60))
        assert process.returncode == 0
        assert started and not any(alive(child) for child in started)  # its redis-server
        # stderr is a pipe: no progress bars, only the stages' timings in one line.
        assert stderr.startswith("stages: starting redis-server ") and "\r" not in stderr
        assert stderr.count("\n") == 1
    finally:
        for pid in [*children(process.pid), process.pid]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        process.wait()


def test_bad_parameters_fail_in_one_line_before_anything_starts() -> None:
    one_line_error(ldptel("demo", "--epsilon", "nan"), "demo", "epsilon")
    one_line_error(ldptel("demo", "--oracle", "nope"), "demo", "oracle")
    one_line_error(ldptel("demo", "--n", "5", "--sdk-users", "6"), "demo", "sdk_users")
    one_line_error(ldptel("demo", "--html", "/proc/none/r.html"), "demo", "html")
    one_line_error(ldptel("demo", "--windows", "0"), "demo", "windows")


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_ctrl_c_while_users_report_stops_everything_it_started(tmp_path: Path) -> None:
    # On a terminal, as a person would run it: its progress bars say which stage is running.
    ours, theirs = open_terminal()
    process = subprocess.Popen(
        [sys.executable, "-m", "ldptel.cli", "demo", "--n", "200000", "--sdk-users", "5000",
         "--html", str(tmp_path / "never.html")],
        stdout=subprocess.DEVNULL, stderr=theirs,
    )  # fmt: skip
    os.close(theirs)
    try:
        interrupt_during_the_sdk_stage(process, ours)
    finally:  # a failing run must not leave the demo or its redis-server behind
        for pid in [*children(process.pid), process.pid]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        process.wait()
        os.close(ours)


def interrupt_during_the_sdk_stage(process: subprocess.Popen[bytes], terminal: int) -> None:
    seen: list[str] = []

    def read() -> None:
        for chunk in terminal_chunks(terminal):
            seen.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def in_the_sdk_stage() -> bool:
        assert process.poll() is None, "".join(seen)
        return bool(SDK_PROGRESS.search("".join(seen))) and bool(children(process.pid))

    try:
        wait_for(in_the_sdk_stage, "the demo's SDK stage under way")
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}; the terminal showed {''.join(seen)[-600:]!r}") from None
    started = children(process.pid)

    process.send_signal(signal.SIGINT)

    assert process.wait(timeout=scaled(60)) == 130
    wait_for(lambda: "interrupted" in "".join(seen), "the demo says it was interrupted")
    assert started and not any(alive(child) for child in started)  # the private redis-server
