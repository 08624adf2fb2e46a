"""The README and the docs pages work when pasted into zsh and stand on their own: globs are
quoted, no link leaves the repository, and ``$OWNLOOP_CHROMIUM`` and ``--limit`` are documented
and do what they say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DOCS = "\n".join(page.read_text() for page in sorted((ROOT / "docs").glob("*.md")))
SHELL_LINES = [
    line
    for block in re.findall(r"```sh\n(.*?)```", README + DOCS, re.DOTALL)
    for line in block.splitlines()
]


def test_every_glob_in_a_shell_line_is_quoted() -> None:
    unquoted = [
        line
        for line in SHELL_LINES
        if re.search(r"(?<!['\"\w])[\w:.,-]*\*[\w:.,*-]*(?!['\"\w])", line)
        and not re.search(r"'[^']*\*[^']*'|\"[^\"]*\*[^\"]*\"", line)
    ]
    assert unquoted == []
    assert "--suite 'miniwob:click-*'" in README
    assert not re.search(r"--suite miniwob:[^\s`']*\*", README + DOCS)


def test_no_link_or_path_leaves_the_repository() -> None:
    assert not re.search(r"\]\((?!https?://|#)[^)]*\.\./", README)
    assert "../" not in README
    assert "/work/" not in README + DOCS  # the pages' links: tests/test_docs.py resolves each


def test_ownloop_chromium_and_limit_are_documented() -> None:
    install, cli = (
        (ROOT / "docs" / "install.md").read_text(),
        (ROOT / "docs" / "cli.md").read_text(),
    )
    assert "OWNLOOP_CHROMIUM" in install and "--limit N" in cli


def test_a_bad_ownloop_chromium_is_a_one_line_error(tmp_path: Path) -> None:
    env = {**os.environ, "OWNLOOP_CHROMIUM": str(tmp_path / "no-chromium")}
    done = subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(tmp_path / "s"), "demo", "--tasks", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"Error: no Chromium at {tmp_path / 'no-chromium'}. Set "
        "$OWNLOOP_CHROMIUM to a browser, or unset it\n"
    )
