"""render is the inverse of parse: what OpenCUA would write reads back to the same actions
(points within a pixel: page → model space is rounded, model → page truncated as OSWorld)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ownloop.agents import make_agent
from ownloop.agents.opencua import OpenCuaAgent
from ownloop.store.events import (
    Action,
    Back,
    ButtonDown,
    ButtonUp,
    Click,
    Drag,
    Fail,
    Finish,
    Hotkey,
    KeyDown,
    KeyUp,
    Move,
    Rejected,
    Scroll,
    TypeText,
    Wait,
)

AGENT = make_agent("opencua", pause=0)
assert isinstance(AGENT, OpenCuaAgent)
SIZES = [(1920, 1080), (1280, 720), (1366, 768), (1024, 768)]
_POINT_FIELDS = (("x", "y"), ("x2", "y2"))


def same(a: Action, b: Action, size: tuple[int, int]) -> bool:
    """Equal apart from raw, model_* and points off by under one model pixel."""
    if type(a) is not type(b):
        return False
    step = max(size[0] / 1000, 1.0) + 1.0
    for field in a.__struct_fields__:
        if field == "raw" or field.startswith("model_"):
            continue
        left, right = getattr(a, field), getattr(b, field)
        if field in ("x", "y") and left is None and isinstance(a, ButtonDown | ButtonUp):
            continue  # a button in place: parse fills in where the pointer is known to be
        if field in ("x", "y", "x2", "y2") and left is not None and right is not None:
            if abs(left - right) > step:
                return False
        elif left != right:
            return False
    return True


points = st.tuples(st.integers(2, 1000), st.integers(2, 700)).map(
    lambda p: (float(p[0]), float(p[1]))
)
words = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)
keys = st.sampled_from(["enter", "tab", "ctrl", "a", "F5", "pagedown", "shift", "ArrowUp"])
single = st.one_of(
    st.builds(
        lambda p, b, c: Click(x=p[0], y=p[1], button=b, count=c),
        points,
        st.sampled_from(["left", "right", "middle"]),
        st.integers(1, 4),
    ),
    st.builds(lambda p: Move(x=p[0], y=p[1]), points),
    st.builds(lambda p, q: Drag(x=p[0], y=p[1], x2=q[0], y2=q[1]), points, points),
    st.builds(
        lambda d, n: Scroll(direction=d, amount=float(n)),
        st.sampled_from(["up", "down", "left", "right"]),
        st.integers(1, 20),
    ),
    st.builds(
        lambda d, n, p: Scroll(direction=d, amount=float(n), x=p[0], y=p[1]),
        st.sampled_from(["up", "down"]),
        st.integers(1, 20),
        points,
    ),
    st.builds(TypeText, text=words),
    st.builds(lambda k: Hotkey(keys=k), st.lists(keys, min_size=1, max_size=3).map(tuple)),
    st.builds(KeyDown, key=keys),
    st.builds(KeyUp, key=keys),
    st.builds(Wait, seconds=st.sampled_from([0.5, 1.0, 2.0])),
    st.builds(
        lambda p, b: ButtonDown(x=p[0], y=p[1], button=b),
        points,
        st.sampled_from(["left", "right"]),
    ),
    st.builds(ButtonUp, button=st.sampled_from(["left", "middle"])),
)
thoughts = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="`#"), max_size=60
)


@settings(max_examples=300, deadline=None)
@given(thoughts, st.lists(single, min_size=1, max_size=4), st.sampled_from(SIZES))
@pytest.mark.slow
def test_render_then_parse_gives_the_actions_back(
    thought: str, actions: list[Action], size: tuple[int, int]
) -> None:
    actions = [
        a
        for a in actions
        if not any(
            getattr(a, f, None) is not None and getattr(a, f) > size[i % 2] - 2
            for i, f in enumerate(("x", "y", "x2", "y2"))
        )
    ] or [Wait(seconds=1.0)]
    text = AGENT.render(thought, actions, size)
    parsed = AGENT.parse(text, size, [])
    flat: list[Action] = []
    for action in actions:  # a Drag renders as moveTo + dragTo
        flat.extend(
            [Move(x=action.x, y=action.y), action] if isinstance(action, Drag) else [action]
        )
    assert len(parsed.actions) == len(flat), (text, parsed.actions)
    assert all(same(a, b, size) for a, b in zip(flat, parsed.actions, strict=True)), (
        text,
        parsed.actions,
    )
    assert parsed.thought == thought.strip()


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)),
    st.booleans(),
)
def test_terminate_round_trips_even_with_fail_in_the_answer(
    answer: str | None, failed: bool
) -> None:
    action = Fail() if failed else Finish(answer=answer if answer is None else f"{answer} FAIL")
    text = AGENT.render("Done.", [action], (1920, 1080))
    (back,) = AGENT.parse(text, (1920, 1080)).actions
    if failed:
        assert isinstance(back, Fail)
    else:
        assert isinstance(back, Finish)
        assert back.answer == (
            action.answer
            if answer is not None  # type: ignore[union-attr]
            else "Done.\n\nThe task is done: terminate with success."
        )


def test_rendered_layout() -> None:
    text = AGENT.render("I will press OK.", [Click(x=640, y=110.5)], (1920, 1080))
    assert text == (
        "## Thought:\nI will press OK.\n\n## Action:\nClick the target at the "
        "marked point.\n\n## Code:\n```python\npyautogui.click(x=644, y=112)\n```\n"
    )


@pytest.mark.parametrize(
    ("thought", "actions"),
    [
        ("x", [Back()]),
        ("x", [Rejected(reason="no")]),
        ("x", [Scroll(direction="up", amount=100.0, unit="px")]),
        ("x", [Click(x=1, y=1), Finish(answer="a")]),
        ("use ``` here", [Wait()]),
        ("line\n## Action:\nsneaky", [Wait()]),
        ("x", []),
    ],
)
def test_what_opencua_cannot_express(thought: str, actions: list[Action]) -> None:
    with pytest.raises(ValueError, match="opencua cannot|nothing to render|terminate is"):
        AGENT.render(thought, actions, (1920, 1080))


def test_the_expert_answers_in_the_opencua_grammar() -> None:
    from ownloop.modelserver.chat import steps_taken

    history = "# Step 1:\n## Action:\nA.\n\n# Step 2:\n## Action:\nB.\n"
    request = {
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "assistant", "content": history},
            {"role": "user", "content": [{"type": "text", "text": "img"}]},
            {"role": "assistant", "content": "# Step 3:\n## Action:\nC.\n"},
        ]
    }
    assert steps_taken(request) == 3  # two assistant messages, three steps
