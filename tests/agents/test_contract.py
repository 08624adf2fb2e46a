"""One contract over every agent: what the recorder and replay rely on from any agent.

- any text parses or raises AgentParseError (one line), nothing else;
- render → parse gives back every action kind the agent can write;
- a very long response is refused before the grammar sees it, quickly;
- every pointer action of a parsed response lands inside the viewport (or just outside it, where
  Chromium gets a point the model wrote off the page), at three viewport sizes;
- hostile text never reaches eval or exec (nor starts a process or writes a file).
"""

from __future__ import annotations

import builtins
import math
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ownloop.agents import AGENTS, Agent, make_agent
from ownloop.agents.base import OFF_PAGE_MARGIN, AgentBase, AgentParseError, Observation, Parsed
from ownloop.agents.describe import deviations_markdown, options_markdown
from ownloop.agents.deviations import DEVIATIONS, RELEASED_COMMITS, deviations_of
from ownloop.agents.fara7b import Fara7bOptions
from ownloop.agents.options import option_docs
from ownloop.errors import OwnloopError
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
    ImagePart,
    KeyDown,
    KeyUp,
    Memorize,
    Move,
    Rejected,
    Scroll,
    Search,
    Task,
    TextPart,
    TypeText,
    Wait,
)

NAMES = sorted(AGENTS)
VIEWPORTS = [(1280, 720), (1440, 900), (1920, 1080)]
_POINTER_FIELDS = (("x", "y"), ("x2", "y2"))

_agents: dict[tuple[str, tuple[int, int]], Agent] = {}


def agent_for(name: str, viewport: tuple[int, int] = (1280, 720)) -> Agent:
    """The agent with its built-in prompt at ``viewport`` (made once per test session)."""
    key = (name, viewport)
    if key not in _agents:
        _agents[key] = make_agent(name, viewport=f"{viewport[0]}x{viewport[1]}")
    return _agents[key]


def _parse(agent: Agent, text: str, size: tuple[int, int]) -> Parsed | None:
    """Parse; only a one-line AgentParseError may escape; coordinates are finite."""
    try:
        parsed = agent.parse(text, size, ())
    except AgentParseError as error:
        assert "\n" not in str(error)
        return None
    for action in parsed.actions:
        for field in ("x", "y", "x2", "y2", "model_x", "model_y", "model_x2", "model_y2"):
            value = getattr(action, field, None)
            assert value is None or (isinstance(value, float | int) and math.isfinite(value))
    return parsed


# ---------------------------------------------------------------------- every agent is one


@pytest.mark.parametrize("name", NAMES)
def test_every_agent_shares_the_contract(name: str) -> None:
    agent = agent_for(name)
    assert isinstance(agent, AgentBase)
    assert agent.name == name
    assert agent.settings.viewport == (1280, 720)
    # the options it records make the same agent again (replay re-makes agents so)
    again = make_agent(name, **agent.options())
    assert again.options() == agent.options()


@pytest.mark.parametrize("name", NAMES)
def test_every_agent_states_the_task_wrapped_by_default_or_bare_as_released(name: str) -> None:
    task = Task(task_id="t", prompt="Click OK.", start_url="http://127.0.0.1:1/form")
    now = Observation(0, ImagePart(sha256="0" * 64, width=1280, height=720), "http://x/")

    def sent(agent: Agent) -> str:
        messages = agent.build_messages(task, (), now)
        return "\n".join(p.text for m in messages for p in m.parts if isinstance(p, TextPart))

    wrapped = "You are interacting with a web application at http://127.0.0.1:1/form. Your task: "
    assert wrapped + "Click OK." in sent(agent_for(name))
    bare = make_agent(name, viewport="1280x720", task_text="bare")
    assert "Click OK." in sent(bare) and "You are interacting" not in sent(bare)
    assert bare.options()["task_text"] == "bare"  # what RunStarted.agent_settings records


# ---------------------------------------------------------------------- only AgentParseError

_FRAGMENTS = st.sampled_from(
    [
        "Thought: ",
        "Action: ",
        "click(",
        "start_box=",
        "'(",
        "100,200",
        ")'",
        ")",
        "\n\n",
        "<tool_call>\n",
        "\n</tool_call>",
        '{"name": "computer_use", "arguments": {',
        '"action": ',
        '"left_click"',
        '"coordinate": [',
        "1e308",
        "-1",
        "]",
        "}",
        "}}",
        '{"thought": "t", ',
        '"action": {"name": "mouse_click", "x": ',
        "50",
        ', "y": ',
        "## Action\n",
        "## Code\n",
        "```python\n",
        "pyautogui.click(x=",
        "0.5",
        ", y=",
        "\n```",
        "computer.terminate(",
        "status='success')",
        "type(content='",
        "\\",
        "'",
        '"',
        "NaN",
        "Infinity",
        "None",
        "for _ in range(10**9):",
        "\x00",
        "\u202e",
        "🙂",
    ]
)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=300))
@pytest.mark.slow
def test_any_text_raises_only_parse_errors(name: str, text: str) -> None:
    _parse(agent_for(name), text, (1280, 720))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(_FRAGMENTS, max_size=30).map("".join))
def test_grammar_fragments_raise_only_parse_errors(name: str, text: str) -> None:
    _parse(agent_for(name), text, (1280, 720))


@pytest.mark.parametrize("name", NAMES)
def test_not_text_is_a_parse_error(name: str) -> None:
    with pytest.raises(AgentParseError, match="response is NoneType, not text"):
        agent_for(name).parse(None, (1280, 720), ())  # type: ignore[arg-type]


# ---------------------------------------------------------------------- long text


@pytest.mark.parametrize("name", NAMES)
def test_a_long_response_is_refused_quickly(name: str) -> None:
    agent = agent_for(name)
    assert isinstance(agent, AgentBase)
    text = "Action: click(start_box='(1,1)')\n" + "(" * (agent.max_response_chars * 10)
    begun = time.perf_counter()
    with pytest.raises(AgentParseError, match=r"response too long \(\d+ characters; the limit"):
        agent.parse(text, (1280, 720), ())
    assert time.perf_counter() - begun < 5  # unread: a parse of it would take minutes


# ---------------------------------------------------------------------- render → parse

_SAMPLES: tuple[Action, ...] = (
    Click(x=640.0, y=360.0),
    Click(x=100.0, y=650.0, count=2),
    Click(x=1200.0, y=40.0, button="right"),
    Click(x=321.0, y=123.0, button="middle"),
    Move(x=500.0, y=300.0),
    Drag(x=100.0, y=100.0, x2=900.0, y2=600.0),
    Scroll(direction="down", amount=5, x=640.0, y=360.0),
    Scroll(direction="up", amount=5),
    TypeText(text="hello 'world' (1)"),
    Hotkey(keys=("Control", "a")),
    Hotkey(keys=("Enter",)),
    KeyDown(key="Shift"),
    KeyUp(key="Shift"),
    Wait(seconds=5.0),
    Goto(url="https://example.com/a"),
    Back(),
    Search(query="cheap flights"),
    Memorize(fact="the price is $3"),
    Finish(answer="done"),
    Finish(),
    CallUser(text="help"),
    Fail(reason="blocked"),
)


def _renderable(name: str) -> list[Action]:
    agent = agent_for(name)
    found = []
    for action in _SAMPLES:
        try:
            agent.render("", [action], (1280, 720))
        except ValueError:
            continue
        found.append(action)
    return found


def _kind(action: Action) -> str:
    return type(action).__name__


@pytest.mark.parametrize(
    ("name", "action"),
    [
        pytest.param(name, action, id=f"{name}-{index}-{_kind(action)}")
        for name in NAMES
        for index, action in enumerate(_SAMPLES)
    ],
)
def test_render_then_parse_gives_the_action_back(name: str, action: Action) -> None:
    agent = agent_for(name)
    try:
        text = agent.render("I act.", [action], (1280, 720))
    except ValueError:
        pytest.skip(f"{name} cannot write {_kind(action)}")
    parsed = _parse(agent, text, (1280, 720))
    assert parsed is not None, text
    # A key combination may come back as key-downs and -ups (fara7b holds keys as released).
    kinds = {"Hotkey": ("Hotkey", "KeyDown")}.get(_kind(action), (_kind(action),))
    same = [got for got in parsed.actions if _kind(got) in kinds]
    assert same, (text, parsed.actions)
    got = same[0]
    for field in _COMPARED:
        want, have = getattr(action, field, None), getattr(got, field, None)
        if want is None or (field == "text" and not isinstance(action, TypeText)):
            continue
        if isinstance(want, float):
            assert isinstance(have, float) and abs(want - have) <= 3.0, (field, text)
        else:
            assert have == want, (field, text)


_COMPARED = ("x", "y", "x2", "y2", "count", "direction", "text", "url", "query", "fact")
"""What every agent must keep through render → parse: where, how often, which way, and what."""


@pytest.mark.parametrize("name", NAMES)
def test_every_agent_writes_the_common_kinds(name: str) -> None:
    kinds = {_kind(action) for action in _renderable(name)}
    assert {"Click", "Scroll", "Finish"} <= kinds, kinds


# ---------------------------------------------------------------------- inside the viewport

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_numbers = st.one_of(
    st.integers(-5000, 50_000).map(str),
    st.floats(-2.0, 2.0, allow_nan=False).map(lambda f: f"{f:.4f}"),
    st.sampled_from(["0", "1", "0.0", "1.0", "999", "1000", "100", "1e9", "-0"]),
)


def _pointer_templates(name: str) -> list[str]:
    """Rendered pointer actions whose numbers the test replaces."""
    agent = agent_for(name)
    texts = []
    for action in _SAMPLES:
        if not any(hasattr(action, x) for x, _ in _POINTER_FIELDS):
            continue
        try:
            texts.append(agent.render("", [action], (1280, 720)))
        except ValueError:
            continue
    return texts


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=lambda v: f"{v[0]}x{v[1]}")
@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.slow
def test_pointer_actions_land_inside_the_viewport(
    name: str, viewport: tuple[int, int], data: st.DataObject
) -> None:
    agent = agent_for(name, viewport)
    template = data.draw(st.sampled_from(_pointer_templates(name)))
    count = len(_NUMBER.findall(template))
    numbers = iter(data.draw(st.lists(_numbers, min_size=count, max_size=count)))
    text = _NUMBER.sub(lambda _: next(numbers), template)
    parsed = _parse(agent, text, viewport)
    if parsed is None:
        return
    width, height = viewport
    for action in parsed.actions:
        for x_field, y_field in _POINTER_FIELDS:
            x, y = getattr(action, x_field, None), getattr(action, y_field, None)
            if x is None or y is None:
                continue
            # inside the page, or just outside it where Chromium gets an off-page point
            margin = OFF_PAGE_MARGIN
            assert -margin <= x <= width + margin and -margin <= y <= height + margin, (
                text,
                action,
            )


# ---------------------------------------------------------------------- hostile text

_watch = threading.local()


def _audit(event: str, args: tuple[object, ...]) -> None:
    # "exec" is raised by eval() and exec() and by running any code object; the others by every
    # way of starting a process or a shell.
    if getattr(_watch, "events", None) is not None and (
        event == "exec"
        or event.startswith(("os.system", "os.exec", "os.posix_spawn", "subprocess.", "os.spawn"))
    ):
        _watch.events.append(event)


sys.addaudithook(_audit)  # hooks cannot be removed; it records only while a test watches


def _payloads(target: Path) -> Iterator[str]:
    touch = f"__import__('os').system('touch {target}')"
    opener = f"open('{target}', 'w').write('x')"
    for code in (touch, opener, f'exec("{opener}")', f'eval("{opener}")'):
        yield code
        yield f"Action: {code}"
        yield f"Action: click(start_box={code})"
        yield f"Action: type(content='x')\n\n{code}"
        yield f"Action: finished(content=f'{{{code}}}')"
        yield (
            '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", '
            f'"coordinate": {code}}}}}\n</tool_call>'
        )
        yield f'<tool_call>\n{{"name": "{code}", "arguments": {{}}}}\n</tool_call>'
        yield f'{{"thought": "t", "action": {code}}}'
        yield f'{{"thought": "{code}", "action": {{"name": "{code}"}}}}'
        yield f"## Action\nclick\n## Code\n```python\n{code}\n```"
        yield f"## Code\n```python\npyautogui.click(x={code}, y=1)\n```"
        yield f"## Code\n```python\nimport os\n{code}\n```"


@pytest.mark.parametrize("name", NAMES)
def test_hostile_text_never_reaches_eval_or_exec(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = agent_for(name)
    target = tmp_path / "pwned"
    calls: list[str] = []

    def refuse(*args: object, **kwargs: object) -> None:
        calls.append(repr(args)[:80])
        raise AssertionError("model text reached eval/exec")

    monkeypatch.setattr(builtins, "eval", refuse)
    monkeypatch.setattr(builtins, "exec", refuse)
    _watch.events = []
    try:
        for text in _payloads(target):
            _parse(agent, text, (1280, 720))
            for action in _renderable(name):  # as typed text, too
                if isinstance(action, TypeText):
                    _parse(agent, agent.render("", [TypeText(text=text)], (1280, 720)), (1280, 720))
        events = list(_watch.events)
    finally:
        _watch.events = None
    assert calls == []
    assert events == []
    assert not target.exists()


def test_the_watch_would_see_an_eval(tmp_path: Path) -> None:
    # The guard above can fail: evaluating a payload is seen, and creates the file.
    target = tmp_path / "pwned"
    _watch.events = []
    try:
        eval(f"__import__('pathlib').Path('{target}').write_text('x')")  # noqa: S307 - the point
        events = list(_watch.events)
    finally:
        _watch.events = None
    assert "exec" in events
    assert target.exists()


@pytest.mark.parametrize("name", NAMES)
def test_a_point_off_the_page_goes_where_chromium_sends_it_or_is_a_rejected_no_op(
    name: str,
) -> None:
    agent = agent_for(name)
    text = _NUMBER.sub("99999", agent.render("", [Click(x=640.0, y=360.0)], (1280, 720)))
    if name == "holo":  # its schema bounds a point to [0, 1000]: off the grid is a parse error
        with pytest.raises(AgentParseError, match=r"action\.x must be a number in \[0, 1000\]"):
            agent.parse(text, (1280, 720), ())
        return
    parsed = _parse(agent, text, (1280, 720))
    assert parsed is not None, text
    (action,) = parsed.actions
    assert isinstance(action, Click), action
    if name == "molmoweb":  # it clamps to the page, as its released executor
        assert 0 <= action.x <= 1280 and 0 <= action.y <= 720
        return
    # the default (off_page=chromium): just outside the page, where Chromium clicks <html>
    assert (action.x, action.y) == (1280 + OFF_PAGE_MARGIN, 720 + OFF_PAGE_MARGIN)
    rejecting = make_agent(name, viewport="1280x720", off_page="reject")
    (action,) = rejecting.parse(text, (1280, 720), ()).actions
    assert isinstance(action, Rejected), action
    assert "is outside the 1280x720 page" in action.reason
    assert agent.translate(action) == ()


# ---------------------------------------------------------------------- one source for the docs


def _section(text: str, marker: str) -> str:
    start = text.index(f"<!-- agents:{marker} ")
    start = text.index("\n", start) + 1
    return text[start : text.index(f"<!-- /agents:{marker} -->")].strip()


def test_the_agents_page_tables_are_the_code() -> None:
    readme = (Path(__file__).parents[2] / "docs" / "agents.md").read_text(encoding="utf-8")
    assert _section(readme, "options") == options_markdown()
    assert _section(readme, "deviations") == deviations_markdown()
    assert "\n## Deviations from the released loops\n" in readme
    # the page names every commit the table is complete against (deviations.RELEASED_COMMITS)
    named = " ".join(readme.split("The table is complete against")[1].split("\n\n")[0].split())
    for agent, source in RELEASED_COMMITS:
        for commit in re.findall(r"\b[0-9a-f]{7}\b", source):
            assert commit in named, (agent, commit)


def test_every_released_bug_the_issue_names_is_a_row() -> None:
    rows = {(row.agent, row.behaviour) for row in DEVIATIONS}
    assert ("uitars", "`press(key=...)`") in rows  # a key-down never released
    assert any(agent == "uitars" and "`')`" in what for agent, what in rows)
    assert any(agent == "opencua" and "hotkey(keys=" in what for agent, what in rows)
    assert any(agent == "fara7b" and '"/"' in what for agent, what in rows)
    assert {row.agent for row in DEVIATIONS} == set(AGENTS) | {"all"}
    # issue 31: the rows that were missing
    behaviours = " ".join(f"{agent}: {what}" for agent, what in rows)
    for agent, what in [
        ("all", "off the page"),
        ("all", "the task as the model reads it"),
        ("opencua", "non-ASCII"),
        ("opencua", "X11 key names"),
        ("molmoweb", "tab_focus"),
        ("molmoweb", "new_tab"),
        ("fara7b", "`control`, `Return`"),
        ("fara7b", "one string"),
        ("uitars", "'left'"),
        ("uitars", "box tokens left in"),
        ("uitars", "two actions on one line"),
    ]:
        assert f"{agent}: " in behaviours and any(
            row_agent == agent and what in row_what for row_agent, row_what in rows
        ), (agent, what)
    assert {agent for agent, _ in RELEASED_COMMITS} == set(AGENTS)
    # issue 31 item 10: OSWorld multiplies a fraction by the smart_resize size, not the screen's
    (fraction,) = [r for r in deviations_of("opencua") if "both numbers in [0, 1]" in r.behaviour]
    assert "`round(x*W')`" in fraction.released and "smart_resize size" in fraction.released
    assert "`round(x*W)`" in fraction.default


@pytest.mark.slow
def test_ownloop_agents_prints_options_prompt_source_and_deviations(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "ownloop", "agents"]
    listing = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OWNLOOP_PATH": str(tmp_path)},
    )
    assert listing.returncode == 0, listing.stderr
    assert [line.split()[0] for line in listing.stdout.splitlines()[: len(NAMES)]] == NAMES
    assert "prompt: built-in (no clone of microsoft/fara found" in listing.stdout
    one = subprocess.run(
        [*command, "fara7b", "--released", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert one.returncode == 0, one.stderr
    for doc in option_docs(Fara7bOptions):
        assert f"  {doc.name} " in one.stdout
    for row in deviations_of("fara7b"):
        assert f"  - {row.behaviour.replace('`', '')}" in one.stdout
    bad = subprocess.run([*command, "gpt-99"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert bad.stderr.strip() == (
        "Error: unknown agent 'gpt-99'. Choose one of: " + ", ".join(NAMES)
    )


def test_a_bad_option_is_one_line_naming_agent_and_option() -> None:
    with pytest.raises(OwnloopError) as caught:
        make_agent("molmoweb", honour_button="maybe")
    assert str(caught.value) == "molmoweb: honour_button must be true or false, got 'maybe'"
    with pytest.raises(OwnloopError) as caught:
        make_agent("opencua", cot="l9")
    assert str(caught.value) == "opencua: cot must be one of l1, l2, l3, got 'l9'"


@pytest.mark.parametrize(
    ("name", "repository"),
    [
        ("fara7b", "microsoft/fara"),
        ("molmoweb", "allenai/molmoweb"),
        ("opencua", "xlang-ai/OSWorld"),
    ],
)
@pytest.mark.slow
def test_record_without_a_clone_prints_one_notice_line(
    name: str, repository: str, tmp_path: Path
) -> None:
    # The notice comes before the endpoint is checked; a dead endpoint then stops the run.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ownloop",
            "--store",
            str(tmp_path / "store"),
            "record",
            name,
            "--suite",
            "miniwob:click-button",
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--released",
            str(tmp_path / "no-clone"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = result.stderr.splitlines()
    assert lines[0] == (
        f"notice: {name}: no clone of {repository} under "
        "--released/$OWNLOOP_PATH; using ownloop's built-in prompt"
    )
    assert not any("Warning" in line for line in lines)
    assert result.returncode == 1
