"""The README and the pages under ``docs/`` keep each other honest (sqlite-utils' way): every
command is in the README's table and in ``docs/cli.md``, every page is linked from the README,
every relative link and anchor resolves, the README stays small, and every shell block can be
pasted into zsh as it is."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from ownloop.cli import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# docs/pending-<name>.md are notes waiting to be folded into the pages: not pages yet.
PAGES = sorted(p for p in (ROOT / "docs").glob("*.md") if not p.name.startswith("pending-"))
DOCUMENTS = [README, *PAGES]
README_LIMIT = 15_000  # bytes: the README is the shop window, the pages are the manual

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _command_paths(group: click.Group, prefix: str = "") -> list[str]:
    paths = []
    for name, command in sorted(group.commands.items()):
        paths.append(prefix + name)
        if isinstance(command, click.Group):
            paths.extend(_command_paths(command, f"{prefix}{name} "))
    return paths


COMMANDS = _command_paths(cli)


def _readme_table() -> str:
    text = README.read_text()
    return text.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]


def test_the_command_walk_sees_the_subcommands() -> None:
    assert {"record", "sql", "audit", "audit blind", "serve-model"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_is_in_the_readme_table_and_in_docs_cli(command: str) -> None:
    table = _readme_table()
    cli_page = (ROOT / "docs" / "cli.md").read_text()
    missing = [
        where
        for where, text in (("README.md", table), ("docs/cli.md", cli_page))
        if not re.search(rf"^\| `ownloop {re.escape(command)}[` ]", text, re.M)
    ]
    assert missing == [], (
        f"`ownloop {command}` is not documented in {' and '.join(missing)}. Add one line "
        f"`| \\`ownloop {command}\\` | what it does |` to the command table under "
        f"'## Commands' in README.md, and a row `| \\`ownloop {command} ARGS [OPTIONS]\\` | "
        f"... |` with every option to the table in docs/cli.md (notes below it if needed)."
    )


def test_every_page_is_linked_from_the_readme() -> None:
    text = README.read_text()
    unlinked = [p.name for p in PAGES if f"](docs/{p.name})" not in text]
    assert unlinked == [], (
        f"docs pages not linked from README.md: {unlinked}. Add a line to the list under "
        "'## Documentation' in README.md: `- [Title](docs/NAME.md): what it covers`."
    )


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    text = _FENCE.sub("", path.read_text())
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.M):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return anchors


def _relative_links(path: Path) -> list[str]:
    links = _LINK.findall(_FENCE.sub("", path.read_text()))
    return [link for link in links if not re.match(r"[a-z][a-z+.-]*:", link)]


def test_every_relative_link_and_anchor_resolves() -> None:
    broken = []
    for document in DOCUMENTS:
        for link in _relative_links(document):
            target, _, anchor = link.partition("#")
            resolved = (document.parent / target).resolve() if target else document
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{document.relative_to(ROOT)}: {link} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{document.relative_to(ROOT)}: {link} (no such heading)")
    assert broken == []


def test_the_readme_is_a_shop_window() -> None:
    size = len(README.read_bytes())
    assert size <= README_LIMIT, (
        f"README.md is {size} bytes, over {README_LIMIT}: move the detail into a docs/*.md page "
        "and link it; measurements go to docs/performance.md"
    )
    assert len(PAGES) >= 15


_GLOB = re.compile(r"(?<!['\"\w])[\w:.,-]*\*[\w:.,*-]*(?!['\"\w])")
_QUOTED_GLOB = re.compile(r"'[^']*\*[^']*'|\"[^\"]*\*[^\"]*\"")


def test_every_shell_block_quotes_its_globs() -> None:
    unquoted = [
        f"{document.relative_to(ROOT)}: {line}"
        for document in DOCUMENTS
        for block in re.findall(
            r"^```(?:sh|bash|shell|console)\n(.*?)^```", document.read_text(), re.M | re.S
        )
        for line in block.splitlines()
        if _GLOB.search(line) and not _QUOTED_GLOB.search(line)
    ]
    assert unquoted == [], "quote each glob, e.g. --suite 'miniwob:click-*' (zsh: no matches found)"
    every = "\n".join(d.read_text() for d in DOCUMENTS)
    assert "--suite 'miniwob:click-*'" in README.read_text()
    assert not re.search(r"--suite miniwob:[^\s`']*\*", every)


def test_the_tasks_file_example_is_a_valid_tasks_file_with_each_grader(tmp_path: Path) -> None:
    from ownloop.world.suites import TasksFileSuite

    page = (Path(__file__).resolve().parents[1] / "docs" / "recording.md").read_text()
    [example] = re.findall(r"```json\n(\{\n  \"setup\".*?)```", page, flags=re.S)
    path = tmp_path / "tasks.json"
    path.write_text(example)
    tasks = TasksFileSuite(str(path), "http://127.0.0.1:8312").tasks()
    graders = {t.task_id: t.grader for t in tasks}
    assert len(tasks) == 6 and graders["browse"] == "answer:contains:done"
    assert graders["add-mug"] is not None and '"type":"network"' in graders["add-mug"]
    assert graders["rename"] == 'json:/_admin/record:$.user.name:eq:"Ada"'
    assert all(t.start_url.startswith("http://127.0.0.1:8312/") for t in tasks)
