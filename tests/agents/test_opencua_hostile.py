"""Model code is data: nothing in a response runs, hostile code is refused quickly, and no input
raises anything but AgentParseError."""

from __future__ import annotations

import math
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ownloop.agents import make_agent
from ownloop.agents.base import AgentParseError, Parsed
from ownloop.agents.opencua import OpenCuaAgent
from ownloop.store.events import Rejected

SIZE = (1920, 1080)
_watch = threading.local()


def _audit(event: str, args: tuple[object, ...]) -> None:
    # "exec" is raised by eval()/exec() and by running any code object (ast.parse only raises
    # "compile", for a tree); "open" by every file open; the rest by starting a process.
    if getattr(_watch, "events", None) is None:
        return
    if event == "open" and args and args[0] == "<unknown>":
        return  # the parser looks for the source of a SyntaxError in "<unknown>" (never there)
    if event in ("exec", "open") or event.startswith(
        ("os.system", "os.exec", "os.posix_spawn", "subprocess.", "os.spawn", "os.remove")
    ):
        _watch.events.append(event)


sys.addaudithook(_audit)  # hooks cannot be removed; it records only inside watching()


class watching:  # noqa: N801 - used as a context manager
    def __enter__(self) -> list[str]:
        _watch.events = []
        return _watch.events  # type: ignore[no-any-return]

    def __exit__(self, *_: object) -> None:
        _watch.events = None


@pytest.fixture(scope="module")
def agent() -> OpenCuaAgent:
    made = make_agent("opencua", pause=0)
    assert isinstance(made, OpenCuaAgent)
    return made


def respond(code: str) -> str:
    return f"## Thought:\nx\n\n## Action:\nDo it.\n\n## Code:\n```python\n{code}\n```"


def check(agent: OpenCuaAgent, text: str) -> Parsed | None:
    """Parse; only a one-line AgentParseError may escape; coordinates are finite floats."""
    try:
        parsed = agent.parse(text, SIZE)
    except AgentParseError as error:
        assert "\n" not in str(error)
        return None
    for action in parsed.actions:
        for field in ("x", "y", "x2", "y2", "model_x", "model_y"):
            value = getattr(action, field, None)
            assert value is None or (isinstance(value, float) and math.isfinite(value))
    return parsed


def rejected(agent: OpenCuaAgent, code: str) -> str:
    parsed = check(agent, respond(code))
    assert parsed is not None, code
    last = parsed.actions[-1]
    assert isinstance(last, Rejected), (code, parsed.actions)
    return last.reason


def payloads(target: Path) -> list[str]:
    opener = f"open('{target}', 'w').write('x')"
    return [
        "import os\nos.system('touch {t}')".format(t=target),
        f"__import__('os').system('touch {target}')",
        opener,
        f'exec("{opener}")',
        f'eval("{opener}")',
        f'pyautogui.click(x=exec("{opener}"), y=1)',
        f"pyautogui.write(message=open('{target}', 'w'))",
        f"from os import system\nsystem('touch {target}')",
        f"pyautogui.__class__.__init__.__globals__['os'].system('touch {target}')",
        f"(lambda: {opener})()",
        f"[{opener} for _ in range(1)]",
        f"x = {opener}",
        f"with open('{target}', 'w') as f:\n    f.write('x')",
        f"for _ in range(2):\n    {opener}",
        f"import pyautogui as os\nos.click(x=1, y=1)\n{opener}",
        f"pyautogui.os.system('touch {target}')",
        f"time.os.system('touch {target}')",
        f"computer.terminate(status=open('{target}', 'w'))",
    ]


def test_payloads_that_would_create_a_file_create_nothing(
    agent: OpenCuaAgent, tmp_path: Path
) -> None:
    target = tmp_path / "pwned"
    for code in payloads(target):
        with watching() as events:
            rejected(agent, code)
        assert events == [], (code, events)
        assert not target.exists(), code
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("import os", "import os is not allowed"),
        ("import subprocess, pyautogui", "import subprocess is not allowed"),
        ("pyautogui.position()", "pyautogui.position() is not allowed"),
        ("os.getcwd()", "attribute access is allowed only on pyautogui, computer and time"),
        ("pyautogui.click.__call__(1, 2)", "dunder names are not allowed"),
        ("pyautogui.click.func(1, 2)", "attribute access is allowed only"),
        ("pyautogui.__dict__", "the expression Attribute"),
        ("pyautogui.__getattribute__('click')(1, 2)", "calling a Call is not allowed"),
        ("pyautogui.__getattribute__('click')", "dunder names are not allowed"),
        ("pyautogui.click(x=(lambda: 1)(), y=2)", "arguments must be literal values"),
        ("pyautogui.write(message=lambda: 1)", "lambdas are not allowed"),
        ("pyautogui.write(message={x for x in 'ab'})", "comprehensions are not allowed"),
        ("exec('1')", "calling exec() is not allowed"),
        ("eval('1')", "calling eval() is not allowed"),
        ("__import__('os')", "dunder names are not allowed"),
        ("for _ in range(10**9):\n    pass", "literal values"),
        ("for _ in range(1000000000):\n    pass", "a loop of 1000000000 turns is over the limit"),
        (
            "for _ in range(100):\n    for _ in range(100):\n        pyautogui.press('a')",
            "a loop inside a loop is not allowed",
        ),
        ("for _ in range(100):\n    pyautogui.press('a', presses=100)", "over 1000 actions"),
        ("pyautogui.scroll(-10000000)", "over the limit of 200"),
        ("pyautogui.click(x=1e999, y=2)", "out of range"),
        ("pyautogui.click(x=10**400, y=2)", "literal values"),
        ("time.sleep(3600)", "over 60 s of sleep"),
        ("pyautogui.press('ctrl+c')", "unknown key"),
        ("pyautogui.click(x=5, y=5, **{'button': 'left'})", "** arguments are not allowed"),
        ("pyautogui.click(x=5, y=5, foo=1)", "has no argument 'foo'"),
        ("while True:\n    pass", "a While statement is not allowed"),
        ("x = 1", "a Assign statement is not allowed"),
        ("def f():\n    pass", "a FunctionDef statement is not allowed"),
        ("pyautogui.moveRel(10, 10)", "needs the pointer position"),
    ],
)
def test_hostile_code_is_refused_with_a_reason(agent: OpenCuaAgent, code: str, reason: str) -> None:
    assert reason in rejected(agent, code)


def test_statements_before_a_refused_one_keep_their_actions(agent: OpenCuaAgent) -> None:
    parsed = check(agent, respond("pyautogui.press('a')\nimport os\npyautogui.press('b')"))
    assert parsed is not None
    kinds = [type(a).__name__ for a in parsed.actions]
    assert kinds == ["Hotkey", "Rejected"]  # 'b' comes after the refusal: never looked at
    assert parsed.actions[1].raw == "import os"


def test_very_long_code_and_responses_are_refused_quickly(agent: OpenCuaAgent) -> None:
    began = time.monotonic()
    with pytest.raises(AgentParseError, match="code too long"):
        agent.parse(respond("pyautogui.press('a')\n" * 800), SIZE)
    with pytest.raises(AgentParseError, match="response too long"):
        agent.parse("#" * 1_000_000, SIZE)
    with pytest.raises(AgentParseError):
        agent.parse(respond("(" * 5000 + ")" * 5000), SIZE)
    with pytest.raises(AgentParseError):
        agent.parse(respond("-" * 11_000 + "1"), SIZE)
    # Worst cases for the section and fence scanning stay linear.
    check(agent, "```" * 7000)
    check(agent, "##\n" * 7000)
    check(agent, "## Thought:\n" * 1500)
    assert time.monotonic() - began < 10


def test_the_biggest_allowed_loop_is_quick(agent: OpenCuaAgent) -> None:
    body = "\n".join(f"    pyautogui.press('{c}')" for c in "abcdefghij")
    began = time.monotonic()
    parsed = check(agent, respond(f"for _ in range(100):\n{body}"))
    assert parsed is not None and len(parsed.actions) == 1000
    assert time.monotonic() - began < 5


text_pieces = st.sampled_from(
    [
        "## Thought:\n",
        "## Action:\n",
        "## Code:\n",
        "## Observation:\n",
        "```python\n",
        "```code\n",
        "```",
        "\n",
        "pyautogui.click(x=1, y=2)",
        "pyautogui.",
        "click",
        "(",
        ")",
        "x=",
        "'",
        '"',
        "computer.terminate(status='success')",
        "computer.wait()",
        "fail",
        "for _ in range(3):\n    ",
        "import os",
        "time.sleep(1)",
        "-",
        "1e999",
        "[",
        "]",
        ",",
        "\\",
        "\x00",
        "é",
        "__",
        "lambda",
    ]
)


_AGENT = make_agent("opencua", pause=0)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
@pytest.mark.slow
def test_arbitrary_code_blocks_only_raise_agent_parse_error(code: str) -> None:
    assert isinstance(_AGENT, OpenCuaAgent)
    check(_AGENT, respond(code))
    check(_AGENT, "## Action:\nx\n```code\n" + code + "\n```")
