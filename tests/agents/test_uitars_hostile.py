"""Model text is data: no input runs code, and no input raises anything but AgentParseError."""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ownloop.agents.base import AgentParseError, Parsed
from ownloop.agents.uitars import UiTarsAgent

_watch = threading.local()


def _audit(event: str, args: tuple[object, ...]) -> None:
    # "exec" is raised by eval() and exec() (and by running any code object); the others by
    # every way of starting a process or a shell.
    if getattr(_watch, "events", None) is not None and (
        event == "exec"
        or event.startswith(
            ("os.system", "os.exec", "os.posix_spawn", "subprocess.", "os.spawn", "os.startfile")
        )
    ):
        _watch.events.append(event)


sys.addaudithook(_audit)  # hooks cannot be removed; it records only inside _watching()


class _Watching:
    def __enter__(self) -> list[str]:
        _watch.events = []
        return _watch.events  # type: ignore[no-any-return]

    def __exit__(self, *_: object) -> None:
        _watch.events = None


def _check(agent: UiTarsAgent, text: str) -> Parsed | None:
    """Parse; only AgentParseError may escape; parsed coordinates are finite numbers."""
    try:
        parsed = agent.parse(text, (1280, 800))
    except AgentParseError as error:
        assert "\n" not in str(error)
        return None
    for action in parsed.actions:
        for field in ("x", "y", "x2", "y2", "model_x", "model_y"):
            value = getattr(action, field, None)
            assert value is None or (isinstance(value, float) and math.isfinite(value))
    return parsed


def _payloads(target: Path) -> Iterator[str]:
    touch = f"__import__('os').system('touch {target}')"
    opener = f"open('{target}', 'w').write('x')"
    for code in (touch, opener, f'exec("{opener}")', f'eval("{opener}")'):
        yield f"Action: click(start_box={code})"
        yield f"Action: click(start_box='{code}')"
        yield f'Action: click(start_box="{code}")'
        yield f"Action: click(start_box='({code},1)')"
        yield f"Action: click(start_box='[{code}, 1, 2, 3]')"
        yield f"Action: {code}"
        yield f"Action: type(content={code})"
        yield f"Action: type(content='x'); {code}; ('')"
        yield f"Action: type(content='x') or {code}"
        yield f"Action: type(content='x')\n\n{code}"
        yield f"Action: hotkey(key={code})"
        yield f"Action: scroll(direction={code})"
        yield f"Action: finished(content=f'{{{code}}}')"
        yield f"Action: click(start_box='(1,2)')\n\n{code}"
        yield f"Action: click(start_box='<point>1 2</point>') if {code} else 0"
        yield f"Thought: {code}\nAction: lambda: {code}"
        yield f"Action: (lambda: {code})()"
        yield f"Action: click(**{{'start_box': {code}}})"
        yield f"Action: click(start_box=[{code}][0])"


def test_hostile_responses_never_run_code(uitars: UiTarsAgent, tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    payloads = list(_payloads(target))
    assert len(payloads) > 50
    with _Watching() as events:
        for text in payloads:
            _check(uitars, text)
    assert events == []
    assert not target.exists()


def test_hostile_text_is_typed_as_text_not_run(uitars: UiTarsAgent, tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    text = f"Action: type(content='__import__(\\'os\\').system(\\'touch {target}\\')')"
    parsed = uitars.parse(text, (1280, 800))
    assert parsed.actions[0].text == f"__import__('os').system('touch {target}')"  # type: ignore[union-attr]
    assert not target.exists()


# ---------------------------------------------------------------- property tests

_FRAGMENTS = st.sampled_from(
    [
        "Thought: ",
        "Reflection: ",
        "Action_Summary: ",
        "Action: ",
        "Action:",
        "\n",
        "\n\n",
        ")\n\n",
        "click(",
        "left_double(",
        "right_single(",
        "hover(",
        "drag(",
        "select(",
        "hotkey(",
        "press(",
        "keydown(",
        "keyup(",
        "release(",
        "type(",
        "scroll(",
        "wait(",
        "finished(",
        "call_user(",
        "open_app(",
        "start_box=",
        "end_box=",
        "point=",
        "start_point=",
        "end_point=",
        "key=",
        "content=",
        "direction=",
        "'",
        '"',
        "(",
        ")",
        "[",
        "]",
        ",",
        " ",
        "<point>",
        "</point>",
        "<|box_start|>",
        "<|box_end|>",
        "1",
        "644",
        "-3",
        "1e308",
        "1e999",
        "nan",
        "inf",
        "0.5",
        "'(644,406)'",
        "'[1, 2, 3, 4]'",
        "'ctrl c'",
        "'down'",
        "'\\n'",
        "\\",
        "\\'",
        "__import__",
        "需要",
        "[EOS]",
        "**",
        "lambda: 0",
        "\x00",
        "\r\n",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(["click", "drag", "scroll", "hotkey", "type", "finished", "keydown"]),
    args=st.dictionaries(
        st.sampled_from(["start_box", "end_box", "key", "content", "direction", "point"]),
        st.one_of(st.text(max_size=30), st.integers(), st.floats(), st.none()).map(repr),
        max_size=3,
    ),
    size=st.tuples(st.integers(1, 4000), st.integers(1, 4000)),
)
def test_calls_with_any_literal_arguments_raise_only_parse_errors(
    name: str, args: dict[str, str], size: tuple[int, int]
) -> None:
    text = f"Thought: t\nAction: {name}(" + ", ".join(f"{k}={v}" for k, v in args.items()) + ")"
    try:
        UiTarsAgent().parse(text, size)
    except AgentParseError:
        pass
