"""Parsing beyond single replies: coordinate spaces, limits, stdout, threads, python -O."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from ownloop.agents.base import AgentParseError
from ownloop.agents.uitars import MAX_RESPONSE_CHARS, UiTarsAgent, UiTarsOptions
from ownloop.store.events import Click, Drag, Scroll


@pytest.mark.parametrize(
    ("viewport", "model_size", "model_point", "page_point"),
    [
        ((1280, 800), (1288, 812), (644, 406), (640.0, 400.0)),
        ((1280, 720), (1288, 728), (644, 364), (640.0, 360.0)),  # agent-formats.md §1
        ((1440, 900), (1428, 896), (714, 448), (720.0, 450.0)),
        ((1920, 1080), (1932, 1092), (966, 546), (960.0, 540.0)),
        ((1366, 768), (1372, 756), (686, 378), (683.0, 384.0)),
        ((1024, 768), (1036, 756), (518, 378), (512.0, 384.0)),
        ((1280, 800), (1288, 812), (0, 0), (0.0, 0.0)),
        ((1280, 800), (1288, 812), (1288, 812), (1280.0, 800.0)),
    ],
)
def test_model_points_map_to_the_screenshot(
    uitars: UiTarsAgent,
    viewport: tuple[int, int],
    model_size: tuple[int, int],
    model_point: tuple[int, int],
    page_point: tuple[float, float],
) -> None:
    text = f"Thought: t\nAction: click(start_box='({model_point[0]},{model_point[1]})')"
    parsed = uitars.parse(text, viewport)
    assert parsed.model_size == model_size
    (click,) = parsed.actions
    assert isinstance(click, Click)
    assert (click.x, click.y) == page_point
    assert (click.model_x, click.model_y) == (float(model_point[0]), float(model_point[1]))


def test_the_image_size_passed_in_is_the_one_used(uitars: UiTarsAgent) -> None:
    # An agent built for 1280x800 reading a 1920x1080 screenshot maps into the screenshot.
    (click,) = uitars.parse("Action: click(start_box='(966,546)')", (1920, 1080)).actions
    assert isinstance(click, Click) and (click.x, click.y) == (960.0, 540.0)


def test_four_number_boxes_are_clicked_at_their_centre(uitars: UiTarsAgent) -> None:
    text = "Action: drag(start_box='(0,0,644,406)', end_box='[644, 406, 1288, 812]')"
    parsed = uitars.parse(text, (1280, 800))
    (drag,) = parsed.actions
    assert isinstance(drag, Drag)
    assert (drag.x, drag.y, drag.x2, drag.y2) == (320.0, 200.0, 960.0, 600.0)
    assert (drag.model_x, drag.model_y, drag.model_x2, drag.model_y2) == (322, 203, 966, 609)


def test_scroll_takes_its_notches_from_the_options() -> None:
    agent = UiTarsAgent(UiTarsOptions(scroll_notches=3))
    (scroll,) = agent.parse("Action: scroll(direction='RIGHT')", (1280, 800)).actions
    assert isinstance(scroll, Scroll)
    assert (scroll.direction, scroll.amount, scroll.unit, scroll.x) == ("right", 3.0, "notch", None)


def test_wait_takes_its_seconds_from_the_options() -> None:
    (wait,) = UiTarsAgent(UiTarsOptions(wait_s=2.5)).parse("Action: wait()", (1280, 800)).actions
    assert wait.seconds == 2.5  # type: ignore[union-attr]


def test_a_response_over_the_limit_is_refused_quickly(uitars: UiTarsAgent) -> None:
    text = "Thought: " + " " * MAX_RESPONSE_CHARS + "x\nAction: click(start_box='(1,2)')"
    with pytest.raises(AgentParseError, match=r"^response too long \(\d+ characters; the limit"):
        uitars.parse(text, (1280, 800))


def test_a_response_just_under_the_limit_is_parsed(uitars: UiTarsAgent) -> None:
    text = "Thought: " + "a" * (MAX_RESPONSE_CHARS - 100) + "\nAction: wait()"
    assert len(uitars.parse(text, (1280, 800)).actions) == 1


def test_not_text_is_a_parse_error(uitars: UiTarsAgent) -> None:
    with pytest.raises(AgentParseError, match="response is NoneType, not text"):
        uitars.parse(None, (1280, 800))  # type: ignore[arg-type]


def test_the_package_prints_nothing_to_stdout(
    uitars: UiTarsAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    # The package prints "Failed to parse action ..." for each of these; we refuse them first.
    for text in ("Action: click(((", "Action: click the button", "Action: x=1"):
        with pytest.raises(AgentParseError, match="ui-tars cannot parse the action"):
            uitars.parse(text, (1280, 800))
    assert capsys.readouterr().out == ""


def test_agents_patch_nothing_and_set_no_warning_filter() -> None:
    code = (
        "import warnings\n"
        "before = list(warnings.filters)\n"
        "import ui_tars.action_parser as package\n"
        "from ownloop.agents import AGENTS, make_agent\n"
        "agents = [make_agent(name) for name in AGENTS]\n"
        "print(warnings.filters == before, 'print' in vars(package))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split() == ["True", "False"]


def test_parsing_garbage_does_not_swallow_other_threads_output(
    uitars: UiTarsAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    stop = threading.Event()

    def parse_garbage() -> None:
        while not stop.is_set():
            with pytest.raises(AgentParseError):
                uitars.parse("Action: click(((", (1280, 800))

    workers = [threading.Thread(target=parse_garbage) for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        for i in range(300):
            print(f"line {i}")
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    assert capsys.readouterr().out.splitlines() == [f"line {i}" for i in range(300)]


def test_python_dash_o_still_requires_action_and_the_command_keeps_warnings_quiet() -> None:
    # The package checks "Action:" with assert, which -O strips; we check it ourselves.
    # Python warns about "1if" and "\\d" when model text is compiled; the ownloop command (not
    # the agent) filters those warnings, so they stay off stderr even under -W default.
    code = (
        "import sys\n"
        "from ownloop.cli import main\n"
        "sys.argv = ['ownloop', '--help']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "from ownloop.agents.uitars import UiTarsAgent\n"
        "from ownloop.agents.base import AgentParseError\n"
        "agent = UiTarsAgent()\n"
        "for text in ['Thought: click(start_box=\\'(1,2)\\')', 'Action: click(start_box=1if 2)']:\n"
        "    try:\n"
        "        agent.parse(text, (1280, 800))\n"
        "    except AgentParseError as e:\n"
        "        print('refused:', e)\n"
        "print(agent.parse(r\"Action: type(content='C:\\dir')\", (1280, 800)).actions[0].text)\n"
    )
    result = subprocess.run(
        [sys.executable, "-O", "-W", "default", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.splitlines()[-3:] == [
        "refused: no 'Action:' in the response",
        "refused: ui-tars cannot parse the action: click(start_box=1if 2)",
        "C:\\dir",
    ]
    assert result.stderr == ""
