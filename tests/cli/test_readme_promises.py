"""The README keeps its promises: every command is in its table (subcommands and docs/cli.md:
tests/test_docs.py), and CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

from ownloop.cli import cli

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_every_command_is_in_the_commands_table() -> None:
    table = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in cli.commands if f"`ownloop {name}" not in table]
    assert missing == []


def test_ci_runs_the_readme_test_command_and_the_first_command_is_the_demo() -> None:
    first_screen = README.split("## ", 1)[0]
    commands = re.findall(r"^(\./setup\.sh.*?)\s+#", first_screen, flags=re.M)
    assert commands == [
        "./setup.sh && .venv/bin/ownloop demo",
        "./setup.sh --test && .venv/bin/python -m pytest",
    ]
    assert commands[1] in (ROOT / ".ci" / "run").read_text()
