"""Recorded text is shown literally: never Rich markup, never a terminal control sequence.

The real CLI in a subprocess on a real store whose session answers
``[/x] [link=http://evil]x[/link] \\x1b[31mred\\x07`` and whose task id hides a bidi override.
Once with output to a pipe (no styles: not one ESC byte may appear) and once with
``FORCE_COLOR`` (Rich styles its own headers, so the test looks for the hostile sequences).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ownloop.store import open_store
from ownloop.store.text import cell, visible
from ownloop.testing.synthetic import Session, agent_step, click, finish, write_sessions

ANSWER = "[/x] [link=http://evil]x[/link] \x1b[31mred\x07"
SHOWN = "[/x] [link=http://evil]x[/link] \\x1b[31mred\\x07"
TASK = "task-\u202etxt.exe"
TASK_SHOWN = "task-\\u202etxt.exe"
HOSTILE = ("\x1b", "\x07", "\x1b]8;", "\u202e", "\r")


def test_visible_escapes_every_control_and_keeps_text() -> None:
    assert visible(ANSWER) == SHOWN
    assert visible("a\rb\x00c\x9bd\u2066e\ud800f") == "a\\x0db\\x00c\\x9bd\\u2066e\\ud800f"
    assert visible("two\nlines\tand tab") == "two\nlines\tand tab"
    assert visible("two\nlines\t", one_line=True) == "two\\x0alines\\x09"
    assert visible(None) == "NULL" and visible(3.5) == "3.5"
    assert visible("x" * 10, 6) == "xxx..."
    assert cell("[bold]x[/bold]").plain == "[bold]x[/bold]"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("literal") / "store"
    step = agent_step(actions=[click()], thought=f"I see {ANSWER}", url="http://site.test/\x1b[2J")
    write_sessions(
        open_store(root),
        Session(
            session_id="s-evil",
            task_id=TASK,
            run_id="r1",
            answer=ANSWER,
            steps=[step, agent_step(actions=[finish(ANSWER)])],
        ),
        Session(
            session_id="s-other",
            task_id="task-2",
            run_id="r1",
            answer="fine",
            start=10.0,
            steps=[agent_step(actions=[click()])],
        ),
    )
    return root


def _ownloop(store: Path, *args: str, color: bool = False, status: int = 0) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(COLUMNS="400", LINES="100", TERM="xterm-256color")
    if color:
        env["FORCE_COLOR"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(store), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (status, ""), done.stderr
    return done.stdout


COMMANDS = [
    ["sql", "select '[/x]' as \"[/x]\", answer from sessions order by session_id"],
    ["sessions"],
    ["show", "s-evil"],
    ["diff", "s-evil", "s-other"],
    ["regrade", "--run", "r1", "--grader", "answer:exact:nothing"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=[args[0] for args in COMMANDS])
def test_a_piped_command_prints_recorded_text_literally(store: Path, args: list[str]) -> None:
    out = _ownloop(store, *args, status=1 if args[0] == "diff" else 0)  # diff: they differ
    assert not any(bad in out for bad in HOSTILE), repr(out)
    if args[0] in ("sql", "sessions", "show"):
        assert SHOWN in out
    if args[0] in ("sessions", "show", "regrade"):
        assert TASK_SHOWN in out


@pytest.mark.parametrize("args", COMMANDS[:3], ids=[args[0] for args in COMMANDS[:3]])
def test_a_styled_terminal_gets_no_link_and_no_foreign_sequence(
    store: Path, args: list[str]
) -> None:
    out = _ownloop(store, *args, color=True)
    assert "\x1b[" in out  # Rich did style its own table: the terminal path is the one tested
    assert "\x1b]8;" not in out  # no hyperlink
    assert "\x07" not in out and "\x1b[31mred" not in out and "\u202e" not in out
    assert SHOWN in out


def test_sql_of_a_markup_closing_tag_prints_it(store: Path) -> None:
    out = _ownloop(store, "sql", "select '[/x]' as v")
    assert "[/x]" in out and "1 row" in out


def test_import_lines_show_a_hostile_file_name_escaped(tmp_path: Path) -> None:
    folder = tmp_path / "results" / "t1"
    (folder / "screens").mkdir(parents=True)
    (folder / "session.json").write_text('{"task_id": "t1", "status": "done"}')
    (folder / "link\x1b[31m\x07").symlink_to("/etc/hostname")
    out = _ownloop(tmp_path / "s", "import", str(tmp_path / "results"), "--agent", "uitars")
    assert "\x1b" not in out and "\x07" not in out
    assert out.splitlines()[0] == "t1: skipped link\\x1b[31m\\x07 (symlink, not followed)"
