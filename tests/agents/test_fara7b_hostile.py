"""Fara-7B model text is data: nothing runs, only AgentParseError escapes, and render → parse
gives the actions back (the scripted expert relies on it)."""

from __future__ import annotations

import json
import math
import sys
import threading
import warnings
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ownloop.agents.base import AgentParseError, Parsed
from ownloop.agents.fara7b import Fara7bAgent
from ownloop.store.events import (
    Action,
    Back,
    CallUser,
    Click,
    Drag,
    Fail,
    Finish,
    Goto,
    Hotkey,
    KeyDown,
    KeyUp,
    Memorize,
    Move,
    Scroll,
    Search,
    TypeText,
    Wait,
)

pytestmark = pytest.mark.filterwarnings("ignore:fara7b")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    AGENT = Fara7bAgent()
VIEW = (1440, 900)
_watch = threading.local()


def _audit(event: str, args: tuple[object, ...]) -> None:
    if getattr(_watch, "events", None) is not None and (
        event == "exec"
        or event.startswith(
            ("os.system", "os.exec", "os.posix_spawn", "subprocess.", "os.spawn", "open")
        )
    ):
        _watch.events.append(event)


sys.addaudithook(_audit)  # records only while _watch.events is set


def _check(text: str) -> Parsed | None:
    """Parse; only a one-line AgentParseError may escape; coordinates are finite."""
    try:
        parsed = AGENT.parse(text, VIEW)
    except AgentParseError as error:
        assert "\n" not in str(error)
        return None
    assert parsed.actions
    for action in parsed.actions:
        for field in ("x", "y", "model_x", "model_y", "seconds", "amount"):
            value = getattr(action, field, None)
            assert value is None or (isinstance(value, float) and math.isfinite(value))
        for op in AGENT.translate(action):
            msgspec.json.encode(op)
    return parsed


def _call(arguments: object) -> str:
    return (
        f"t\n<tool_call>\n{json.dumps({'name': 'computer_use', 'arguments': arguments})}"
        "\n</tool_call>"
    )


_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_names = st.sampled_from(
    [
        "left_click",
        "click",
        "mouse_move",
        "hover",
        "type",
        "input_text",
        "key",
        "keypress",
        "scroll",
        "visit_url",
        "web_search",
        "history_back",
        "wait",
        "sleep",
        "pause_and_memorize_fact",
        "terminate",
        "stop",
        "refresh",
        "x",
    ]
)
_keys = st.sampled_from(
    [
        "coordinate",
        "text",
        "text_value",
        "press_enter",
        "keys",
        "pixels",
        "url",
        "query",
        "fact",
        "time",
        "duration",
        "status",
        "delete_existing_text",
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=_names, extra=st.dictionaries(_keys, _values, max_size=5))
@pytest.mark.slow
def test_any_arguments_parse_or_fail_cleanly(name: str, extra: dict[str, object]) -> None:
    _check(_call({"action": name, **extra}))


@settings(max_examples=200, deadline=None)
@given(head=st.text(max_size=40), body=st.text(max_size=120), newlines=st.booleans())
def test_anything_between_tags_fails_cleanly(head: str, body: str, newlines: bool) -> None:
    nl = "\n" if newlines else ""
    _check(f"{head}<tool_call>{nl}{body}{nl}</tool_call>")


@pytest.mark.parametrize(
    "body",
    [
        "[" * 100_000,
        "{" * 5000 + "}" * 5000,
        "(" * 1000 + ")" * 1000,
        '{"arguments": {"action": "left_click", "coordinate": [1e999, 1]}}',
        '{"arguments": {"action": "left_click", "coordinate": [NaN, 1]}}',
        '{"arguments": {"action": "scroll", "pixels": Infinity}}',
        '{"arguments": {"action": "wait", "time": 1e300}}',
        "{'arguments': {'action': 'type', 'coordinate': [1, 2], 'text': b'bytes'}}",
        "{'arguments': {'action': {1, 2}}}",
        '{"arguments": []}',
        "9" * 5000,
    ],
)
def test_hostile_bodies(body: str) -> None:
    _check(f"<tool_call>\n{body}\n</tool_call>")
    _check(f"x<tool_call>{body}")


def test_code_is_never_run(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    payloads = [
        f"__import__('os').system('touch {target}')",
        f"open('{target}', 'w').write('x')",
        f"{{'arguments': {{'action': 'type', 'coordinate': [1, 2], "
        f"'text': __import__('os').system('touch {target}')}}}}",
        f"exec(\"open('{target}', 'w')\")",
        "(lambda: 1)()",
        "[x for x in ().__class__.__base__.__subclasses__()]",
    ]
    _watch.events = []
    try:
        for body in payloads:
            assert _check(f"<tool_call>\n{body}\n</tool_call>") is None
        events = list(_watch.events)
    finally:
        _watch.events = None
    assert events == []
    assert not target.exists()


# ---------------------------------------------------------------------- render → parse


def _bare(actions: tuple[Action, ...]) -> list[Action]:
    out = []
    for action in actions:
        fields: dict[str, object] = {"raw": ""}
        for name in ("model_x", "model_y"):
            if hasattr(action, name):
                fields[name] = None
        out.append(msgspec.structs.replace(action, **fields))
    return out


_point = st.tuples(st.integers(0, 1439), st.integers(0, 899))
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
# Fara's thoughts are the text before its <tool_call>; render refuses thoughts holding the tag.
_thought = _text.filter(lambda t: "tool_call>" not in t)


def _near(a: Action, b: Action) -> bool:
    """Equal, but page points within one model pixel (1440/1428 page px)."""
    if isinstance(a, Click | Move) and type(a) is type(b):
        return abs(a.x - b.x) <= 1.01 and abs(a.y - b.y) <= 1.01  # type: ignore[union-attr]
    return a == b


@settings(max_examples=300, deadline=None)
@given(point=_point, text=_text, enter=st.booleans(), clear=st.booleans(), thought=_thought)
@pytest.mark.slow
def test_type_round_trips(
    point: tuple[int, int], text: str, enter: bool, clear: bool, thought: str
) -> None:
    actions: list[Action] = [Click(x=point[0], y=point[1])]
    if clear:
        actions += [Hotkey(keys=("ControlOrMeta", "A")), Hotkey(keys=("Backspace",))]
    actions.append(TypeText(text=text))
    if enter:
        actions.append(Hotkey(keys=("Enter",)))
    parsed = AGENT.parse(AGENT.render(thought, actions, VIEW), VIEW)
    assert parsed.thought == thought.strip()
    back = _bare(parsed.actions)
    assert len(back) == len(actions) and all(map(_near, back, actions))


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        ([Click(x=640, y=360)], None),
        ([Move(x=0, y=0)], None),
        ([Scroll(direction="down", amount=3)], [Scroll(direction="down", amount=400, unit="px")]),
        ([Scroll(direction="up", amount=400, unit="px")], None),
        (
            [Hotkey(keys=("ctrl", "shift", "t"))],
            [
                KeyDown(key="ctrl"),
                KeyDown(key="shift"),
                KeyDown(key="t"),
                KeyUp(key="t"),
                KeyUp(key="shift"),
                KeyUp(key="ctrl"),
            ],
        ),
        ([KeyDown(key="Escape"), KeyUp(key="Escape")], None),
        ([Wait(seconds=2.5)], None),
        ([Goto(url="https://a.test/?q=1")], None),
        ([Search(query='cheap "flights" & hotels')], None),
        ([Back()], None),
        ([Memorize(fact="UA 123 costs $240")], None),
        ([Finish(answer="The answer is 42.")], None),
        ([Fail(reason="Blocked by a captcha.")], None),
    ],
)
def test_render_then_parse(actions: list[Action], expected: list[Action] | None) -> None:
    text = AGENT.render("I look at the page.", actions, VIEW)
    parsed = AGENT.parse(text, VIEW)
    back = _bare(parsed.actions)
    want = expected or actions
    assert len(back) == len(want) and all(map(_near, back, want)), back


def test_finish_writes_its_answer_as_the_thoughts() -> None:
    text = AGENT.render("Done.", [Finish(answer="5533 W Sunset Blvd")], VIEW)
    assert text == (
        '5533 W Sunset Blvd\n<tool_call>\n{"name": "computer_use", "arguments": '
        '{"action": "terminate", "status": "success"}}\n</tool_call>'
    )
    assert AGENT.ending(AGENT.parse(text, VIEW), []).answer == "5533 W Sunset Blvd"  # type: ignore[union-attr]


def test_render_writes_model_space_points() -> None:
    text = AGENT.render("", [Click(x=1083.025, y=37.165)], VIEW)
    assert text == (
        '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click",'
        ' "coordinate": [1074, 37]}}\n</tool_call>'
    )


@pytest.mark.parametrize(
    "actions",
    [
        [],
        [TypeText(text="no point")],
        [Click(x=1, y=1, button="right")],
        [Click(x=1, y=1, count=2)],
        [Drag(x=1, y=1, x2=2, y2=2)],
        [CallUser()],
        [Scroll(direction="left")],
        [Scroll(direction="down", x=5, y=5)],
        [Click(x=1, y=1), Click(x=2, y=2)],
        [Back(), Back()],
        [KeyDown(key="a"), KeyUp(key="b")],
        [Click(x=1, y=1), TypeText(text="a"), TypeText(text="b")],
        [Finish(answer="a <tool_call> b")],
    ],
)
def test_render_refuses_what_fara_cannot_write(actions: list[Action]) -> None:
    with pytest.raises(ValueError):
        AGENT.render("", actions, VIEW)


def test_render_refuses_a_thought_holding_the_tag() -> None:
    with pytest.raises(ValueError, match="cannot hold a <tool_call> tag"):
        AGENT.render("look <tool_call>", [Click(x=1, y=1)], VIEW)
