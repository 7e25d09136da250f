"""Every `ldptel` command that lists or changes something takes `--json` (issue 30): the
parser is walked, so a new command without it fails here. The services (collector serve,
dashboard) run until stopped and log JSON lines instead."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from ldptel.cli.main import build_parser

SERVICES = {"collector serve", "dashboard"}


def leaf_commands(
    parser: argparse.ArgumentParser, path: str = ""
) -> Iterator[tuple[str, set[str]]]:
    """(command path, its option strings) of every command without subcommands."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path.strip(), {o for action in parser._actions for o in action.option_strings}
    for action in subparsers:
        for name, sub in action.choices.items():
            yield from leaf_commands(sub, f"{path} {name}")


def test_every_command_but_the_services_takes_json() -> None:
    commands = dict(leaf_commands(build_parser()))
    assert commands.keys() >= SERVICES
    assert {"collector campaign list", "collector token list", "report", "aggregator prune",
            "aggregator alerts"} <= commands.keys()  # fmt: skip
    assert sorted(c for c, options in commands.items()
                  if "--json" not in options and c not in SERVICES) == []  # fmt: skip
