"""Every `ldptel` command in the code blocks of README.md and docs/*.md: written as the
checkout's `.venv/bin/ldptel` (bare `ldptel` is not on PATH until the venv is activated),
accepted by the real CLI's parser, and, for those that need no running service (simulate,
audit, budget, heavy-hitters), run in order to a zero exit. Those that need the collector
run in test_readme_flow.py, inside the README's walk-through (all but the services that never
end and the commands against another Redis: parsed here only); `demo` in the demo's tests."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from deploy_kit import ROOT

from ldptel.cli.main import build_parser

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Commands that need no collector, Redis or aggregator: run by the last test.
OFFLINE = {"simulate", "audit", "budget", "heavy-hitters"}
#: An ldptel program word and what follows it up to a shell operator or a comment.
COMMAND = re.compile(r"(?<![\w/.\[-])((?:[\w./-]*/)?ldptel) ([a-z][^|;&)>#]*)")


def shell_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, logical line) of the fenced blocks marked bash or sh (continuation lines
    joined); the docs write every command in such a block (unmarked ones are diagrams)."""
    found: list[tuple[int, str]] = []
    fence: str | None = None
    pending = ""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
            continue
        if fence not in ("bash", "sh"):
            continue
        pending += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            found.append((number, pending.strip()))
            pending = ""
    return found


def line_commands(line: str) -> list[tuple[str, str]]:
    """(program word, argument text) of the ldptel commands of a shell line: those inside a
    command substitution, then the line's own (a substitution standing for one value)."""
    line = re.sub(r"\s\d?>\s*\S+", " ", re.sub(r"\s#\s.*$", "", line))  # no redirections
    inner = re.findall(r"\$\(([^()]*)\)", line)
    line = re.sub(r"\$\([^()]*\)", "VALUE", line)
    found = [command for text in inner for command in COMMAND.findall(text)]
    found += COMMAND.findall(line)
    return found


def doc_commands() -> list[tuple[str, str, list[str]]]:
    """(where, program word, arguments) of every ldptel command, in document order."""
    commands = []
    for path in DOCS:
        for number, line in shell_lines(path):
            for program, rest in line_commands(line):
                where = f"{path.relative_to(ROOT)}:{number}"
                commands.append((where, program, shlex.split(rest)))
    return commands


def test_no_command_hides_in_another_block() -> None:
    """A command line in an unmarked or other-language block would escape these checks."""
    for path in DOCS:
        fence: str | None = None
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.startswith("```"):
                fence = None if fence is not None else line[3:].strip()
            elif fence not in (None, "bash", "sh"):
                assert not re.match(r"\s*(\S*/)?ldptel [a-z]", line), f"{path.name}:{number}"


def test_the_docs_have_commands_to_check() -> None:
    places = {where.split(":")[0] for where, _, _ in doc_commands()}
    assert {"README.md", "docs/aggregator.md", "docs/collector.md", "docs/operations.md",
            "docs/numeric.md", "docs/heavy-hitters.md", "docs/client.md"} <= places  # fmt: skip


@pytest.mark.parametrize(("where", "program", "args"), doc_commands(), ids=lambda v: str(v))
def test_every_doc_command_is_the_venvs_ldptel_and_parses(
    where: str, program: str, args: list[str]
) -> None:
    assert program == ".venv/bin/ldptel", where
    try:
        build_parser().parse_args(args)
    except SystemExit as error:  # argparse's usage error
        pytest.fail(f"{where}: ldptel {shlex.join(args)} does not parse ({error})")


@pytest.mark.slow
def test_the_offline_doc_commands_run_in_order() -> None:
    ldptel = Path(sys.executable).parent / "ldptel"
    offline = [(where, args) for where, _, args in doc_commands() if args[0] in OFFLINE]
    assert len(offline) >= 10
    for where, args in offline:
        result = subprocess.run([str(ldptel), *args], cwd=ROOT, capture_output=True, text=True,
                                timeout=600, check=False)  # fmt: skip
        assert result.returncode == 0, f"{where}: {shlex.join(args)}\n{result.stderr[-2000:]}"
        assert result.stdout.strip(), where
