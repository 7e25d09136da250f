"""The CLI's progress line: shown on terminals, silent in pipes, cleared when done."""

from __future__ import annotations

import io

from ldptel.cli.progress import ProgressLine


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
