"""Progress is for a person at a terminal: drawn on stderr when it is a terminal, cleared when
done, and never written into a pipe or beside --json output."""

from __future__ import annotations

import io

from ldptel_command import ldptel, ldptel_on_a_terminal

from ldptel.cli.progress import ProgressLine

SIMULATE = ("simulate", "--oracle", "de", "--epsilon", "1", "--domain-size", "8",
            "--n", "20000", "--seed", "1")  # fmt: skip
AUDIT = ("audit", "--oracle", "de", "--epsilon", "1", "--domain-size", "4",
         "--samples", "2000", "--pairs", "1", "--seed", "1")  # fmt: skip


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_shown_on_a_terminal_only() -> None:
    terminal, pipe = Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        with ProgressLine(stream, "simulating", interval=0.0) as progress:
            progress.update(50, 100)
            progress.update(100, 100)
    assert "simulating:  50.0% (50/100)" in terminal.getvalue()
    assert terminal.getvalue().endswith("\r\033[K")  # the line is cleared afterwards
    assert pipe.getvalue() == ""


def test_commands_write_no_progress_into_pipes() -> None:
    for command in (SIMULATE, AUDIT):
        for json in ((), ("--json",)):
            done = ldptel(*command, *json)
            assert done.returncode == 0, done.stderr
            assert done.stderr == ""  # no progress bar, no carriage return, nothing
            assert "\r" not in done.stdout


def test_commands_draw_progress_on_a_terminal_but_not_beside_json() -> None:
    for command, label in ((SIMULATE, "simulating de: 100.0%"), (AUDIT, "auditing de: ")):
        stdout, terminal = ldptel_on_a_terminal(*command)
        assert label in terminal and terminal.endswith("\r\033[K")  # drawn, then cleared
        assert "\r" not in stdout

        stdout, terminal = ldptel_on_a_terminal(*command, "--json")
        assert terminal == "" and stdout.startswith("{")
