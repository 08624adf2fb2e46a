"""Every stored Fara-7B reply (agent-formats.md §3 examples and odd ones) → actions → operations.

Viewport 1440x900, model space 1428x896: x·1440/1428, y·900/896.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from ownloop.agents.base import AgentParseError, Parsed
from ownloop.agents.fara7b import Fara7bAgent
from ownloop.store.events import (
    Back,
    Click,
    Fail,
    Finish,
    Goto,
    Hotkey,
    KeyboardDown,
    KeyboardPress,
    KeyboardType,
    KeyboardUp,
    KeyDown,
    KeyUp,
    Memorize,
    MouseClick,
    MouseMove,
    MouseWheel,
    Move,
    PageGoBack,
    PageGoto,
    Scroll,
    Search,
    Sleep,
    TypeText,
    Wait,
)

REPLIES = Path(__file__).parent / "replies" / "fara7b"
VIEW = (1440, 900)
BING = "https://www.bing.com/search?q={}&FORM=QBLH"


def _px(x: float, y: float) -> tuple[float, float]:
    return round(x * 1440 / 1428, 3), round(y * 900 / 896, 3)


@pytest.fixture(scope="module")
def fara() -> Fara7bAgent:
    return Fara7bAgent()  # no clone: the built-in prompt (the parser is the same)


def _read(name: str) -> str:
    return (REPLIES / name).read_text(encoding="utf-8")


def _bare(parsed: Parsed) -> list[object]:
    """Actions without raw text and model coordinates, for comparison."""
    out = []
    for action in parsed.actions:
        fields: dict[str, object] = {"raw": ""}
        for name in ("model_x", "model_y"):
            if hasattr(action, name):
                fields[name] = None
        out.append(msgspec.structs.replace(action, **fields))
    return out


def _ops(fara: Fara7bAgent, parsed: Parsed) -> list[object]:
    return [op for action in parsed.actions for op in fara.translate(action)]


# (file, thought, actions, operations)
CASES = [
    (
        "readme_click.txt",
        "To begin locating the closest GameStop store, I will click on the "
        "'Trade-In' button, which typically leads to a store locator feature on retail websites.",
        [Click(x=1083.025, y=37.165)],
        [MouseClick(x=1083.025, y=37.165)],
    ),
    (
        "readme_web_search.txt",
        None,
        [Search(query="GameStop store locator zip code 90028")],
        [PageGoto(url=BING.format("GameStop+store+locator+zip+code+90028"))],
    ),
    (
        "readme_terminate.txt",
        None,
        [
            Finish(
                answer="The closest GameStop store to zip code 90028 is located at 5533 W Sunset "
                "Blvd, Los Angeles, CA 90028. …"
            )
        ],
        [],
    ),
    (
        "type_no_enter_clear.txt",
        None,
        [
            Click(x=_px(512, 240)[0], y=_px(512, 240)[1]),
            Hotkey(keys=("ControlOrMeta", "A")),
            Hotkey(keys=("Backspace",)),
            TypeText(text="Seattle"),
        ],
        [
            MouseClick(x=_px(512, 240)[0], y=_px(512, 240)[1]),
            KeyboardPress(key="ControlOrMeta+A"),
            KeyboardPress(key="Backspace"),
            KeyboardType(text="Seattle"),
        ],
    ),
    (
        "scroll_down.txt",
        "…",
        [Scroll(direction="down", amount=400, unit="px")],
        [MouseWheel(dx=0.0, dy=400.0)],
    ),
    (
        # issue 31: the released int("-300") scrolls; it is no parse error
        "scroll_pixels_text.txt",
        "The list goes on below; scroll down.",
        [Scroll(direction="down", amount=400, unit="px")],
        [MouseWheel(dx=0.0, dy=400.0)],
    ),
    ("memorize.txt", "…", [Memorize(fact="Flight UA 123 costs $240")], []),
    (
        "python_literal.txt",
        None,
        [Click(x=_px(714, 448)[0], y=450.0)],
        [MouseClick(x=_px(714, 448)[0], y=450.0)],
    ),
    ("no_newlines.txt", "Tags without their newlines.", [Back()], [PageGoBack()]),
    (
        "no_closing_tag.txt",
        None,
        [KeyDown(key="ctrl"), KeyDown(key="a"), KeyUp(key="a"), KeyUp(key="ctrl")],
        [
            KeyboardDown(key="Control"),
            KeyboardDown(key="a"),
            KeyboardUp(key="a"),
            KeyboardUp(key="Control"),
        ],
    ),
    (
        "terminate_failure.txt",
        None,
        [Fail(reason="The site refuses every search; I cannot finish this.")],
        [],
    ),
    (
        "type_default_enter.txt",
        None,
        [
            Click(x=_px(100, 50)[0], y=_px(100, 50)[1]),
            TypeText(text="wireless mouse"),
            Hotkey(keys=("Enter",)),
        ],
        [
            MouseClick(x=_px(100, 50)[0], y=_px(100, 50)[1]),
            KeyboardType(text="wireless mouse"),
            KeyboardPress(key="Enter"),
        ],
    ),
    ("type_no_coordinate.txt", None, [Wait(seconds=0.0)], [Sleep(seconds=0.0)]),
    (
        "visit_bare_domain.txt",
        None,
        [Goto(url="https://arxiv.org/abs/2401.00001")],
        [PageGoto(url="https://arxiv.org/abs/2401.00001")],
    ),
    (
        "visit_with_space.txt",
        None,
        [Search(query="cheap flights to Oslo")],
        [PageGoto(url=BING.format("cheap+flights+to+Oslo"))],
    ),
    ("wait_duration.txt", None, [Wait(seconds=2.0)], [Sleep(seconds=2.0)]),
    ("wait_default.txt", None, [Wait(seconds=3.0)], [Sleep(seconds=3.0)]),
    ("hover.txt", None, [Move(x=0.0, y=900.0)], [MouseMove(x=0.0, y=900.0)]),
    ("stop_no_thoughts.txt", "", [Finish(answer="")], []),
    (
        "two_calls.txt",
        None,
        [Scroll(direction="up", amount=400, unit="px")],
        [MouseWheel(dx=0.0, dy=-400.0)],
    ),
]


@pytest.mark.parametrize(("name", "thought", "actions", "ops"), CASES, ids=[c[0] for c in CASES])
def test_reply(
    fara: Fara7bAgent, name: str, thought: str | None, actions: list[object], ops: list[object]
) -> None:
    text = _read(name)
    parsed = fara.parse(text, VIEW)
    assert _bare(parsed) == actions
    assert _ops(fara, parsed) == ops
    assert parsed.model_size == (1428, 896)
    if thought is not None:
        assert parsed.thought == thought
    # Every action of one call carries the call as the model wrote it, tags included.
    raws = {action.raw for action in parsed.actions}
    assert len(raws) == 1 and next(iter(raws)).startswith("<tool_call>")
    assert next(iter(raws)) in text


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bad_no_tag.txt", "no <tool_call> in the response"),
        ("bad_json.txt", "the tool call is neither JSON nor a literal"),
        ("bad_click_no_coordinate.txt", "left_click needs a coordinate"),
        ("bad_unknown_action.txt", "unknown action 'double_click'"),
        ("bad_unknown_key.txt", "key: unknown key 'Hyper'"),
        ("bad_refresh.txt", "refresh is not in the fara7b action space"),
        ("bad_no_arguments.txt", "the tool call has no 'arguments' object"),
        ("bad_string_coordinate.txt", "coordinate must be [x, y] numbers"),
        ("bad_call_expression.txt", "the tool call is neither JSON nor a literal"),
        ("bad_scroll_pixels_fraction_text.txt", "scroll: pixels must be a whole number"),
    ],
)
def test_bad_reply_is_one_line_parse_error(fara: Fara7bAgent, name: str, message: str) -> None:
    with pytest.raises(AgentParseError) as caught:
        fara.parse(_read(name), VIEW)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_every_stored_reply_is_covered() -> None:
    covered = {case[0] for case in CASES}
    stored = {path.name for path in REPLIES.glob("*.txt")}
    assert stored - covered == {name for name in stored if name.startswith("bad_")}
