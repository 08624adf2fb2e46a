"""The step-by-step view: every recorded fact is shown, and recorded text is shown as data."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from ownloop.replay.fold import fold
from ownloop.replay.render import action_text, op_text, plain, session_view
from ownloop.store import open_store
from ownloop.store.events import Click, Finish, MouseWheel, Scroll, TypeText
from ownloop.testing.synthetic import Session, agent_step, click, finish, session_events

HOSTILE = "[bold red]fake[/] \x1b[31mred\x1b[0m \u202eevil"


def _text(spec: Session, tmp_path: Path) -> str:
    store = open_store(tmp_path / "s", fsync=False)
    session = fold(session_events(spec, store.put_blob(b"png")))
    console = Console(record=True, width=200, soft_wrap=True, file=io.StringIO())
    console.print(session_view(session))
    return console.export_text()


def test_every_recorded_fact_is_shown(tmp_path: Path) -> None:
    spec = Session(
        "s1",
        steps=(
            agent_step(
                [click(), TypeText(text="hello")],
                thought="Click then type.",
                failed_first="Thought: ?\nAction: nothing(",
                url="http://site.test/form",
                op_error="Timeout 500ms exceeded",
            ),
            agent_step([finish("done")], thought="All done."),
        ),
        answer="done",
    )
    text = _text(spec, tmp_path)
    for expected in (
        "Session s1",
        "task task-1",
        "Task: Do task-1",
        "Start: http://site.test/start",
        "Step 1",
        "http://site.test/form",
        "call 1 (step)",
        "parse error: could not parse",
        "response: 'Thought: ?\\nAction: nothing('",
        "call 2 (resample)",
        "Thought: Click then type.",
        "action 0: click(x=",
        "op 0: mouse.click(x=",
        "on button#go 'Go' [role=button]",
        "ERROR Timeout 500ms exceeded",
        "action 1: type(text='hello')",
        "keyboard.type(text='hello')",
        "Step 2",
        "action 0: finish(answer='done')",
        "Outcome: finished",
        "answer 'done'",
        "evidence final_url",
        "Grades:",
        "pass 1.00  answer:contains:done",
        "(record)",
        "latest",
    ):
        assert expected in text, expected


def test_model_text_is_data(tmp_path: Path) -> None:
    spec = Session("s2", steps=(agent_step([finish(HOSTILE)], thought=HOSTILE),), answer=HOSTILE)
    text = _text(spec, tmp_path)
    assert "\x1b" not in text and "\u202e" not in text
    assert "[bold red]fake[/]" in text  # printed as written, not as markup
    assert "\\x1b[31mred" in text and "\\u202eevil" in text


def test_unfinished_and_ungraded(tmp_path: Path) -> None:
    events = session_events(Session("s3", steps=(agent_step([click()]),), grades=()), "0" * 64)
    session = fold(e for e in events if e.__struct_config__.tag != "session_ended")
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(session_view(session))
    text = console.export_text()
    assert "unfinished (no SessionEnded)" in text and "Grades: none" in text


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (Click(x=10, y=20.5, model_x=3, raw="click(...)"), "click(x=10, y=20.5)"),
        (Click(x=1, y=2, button="right", count=2), "click(x=1, y=2, button='right', count=2)"),
        (Scroll(direction="up", amount=3, x=5, y=6), "scroll(direction='up', amount=3, x=5, y=6)"),
        (Finish(), "finish()"),
        (TypeText(text="a\nb"), "type(text='a\\nb')"),
    ],
)
def test_action_text(action: object, expected: str) -> None:
    assert action_text(action) == expected  # type: ignore[arg-type]


def test_op_text_and_plain() -> None:
    assert op_text(MouseWheel(dy=-100)) == "mouse.wheel(dy=-100)"
    assert plain("a\tb\nc\x07\x9b") == "a\tb\nc\\x07\\x9b"
    assert plain("x" * 10, 6) == "xxx..."


MODULES = ("selection", "target", "render", "regrade", "reparse", "diff")


@pytest.mark.parametrize("name", MODULES)
def test_replay_modules_public_names_and_imports(name: str) -> None:
    import ast
    import importlib

    module = importlib.import_module(f"ownloop.replay.{name}")
    assert module.__all__ and all(hasattr(module, n) for n in module.__all__)
    tree = ast.parse(Path(module.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m.split(".")[0] in ("duckdb", "playwright")}
    ours = {m for m in imported if m.startswith("ownloop")}
    assert all(
        m.startswith(
            (
                "ownloop.errors",
                "ownloop.scoring",
                "ownloop.store",
                "ownloop.agents",
                "ownloop.grading",
                "ownloop.world.suites",
                "ownloop.replay",
            )
        )
        for m in ours
    ), ours
