"""The MiniWoB suite on real Chromium: seeded episodes, clicks, rewards as evidence."""

from __future__ import annotations

import json

import pytest

from ownloop.errors import OwnloopError
from ownloop.store.events import MouseClick
from ownloop.world.suites import MiniwobSuite, load_suite
from ownloop.world.suites.miniwob import (
    default_seed,
    html_dir,
    page_links,
    parse_seeds,
    serve_static,
    start_episode,
)

SEED = 5  # click-button seed 5: "submit" among "no" and "okay"

_BUTTONS = """() => [...document.querySelectorAll('#area button')].map((b) => {
  const r = b.getBoundingClientRect();
  return {text: b.textContent, x: r.x + r.width / 2, y: r.y + r.height / 2};
})"""


@pytest.fixture(scope="module")
def suite(chromium):
    with load_suite(suite="miniwob:click-button", seeds=str(SEED), browser=chromium) as suite:
        yield suite


def reward(suite, session, task):
    [piece] = suite.capture(session, task)
    assert piece.name == "miniwob_reward"
    return json.loads(piece.value_json)


def started(suite, new_session):
    [task] = suite.tasks()
    session = new_session()
    suite.prepare(session, task)
    return task, session


@pytest.mark.browser
def test_tasks_carry_the_seed_the_prompt_and_the_grader(suite):
    [task] = suite.tasks()
    assert task.task_id == f"click-button-{SEED}" and task.seed == SEED
    assert task.prompt == 'Click on the "submit" button.'
    assert task.start_url == f"{suite.base}/miniwob/click-button.html?seed={SEED}"
    assert (task.suite, task.grader, suite.default_grader) == ("miniwob", "miniwob", "miniwob")


@pytest.mark.browser
def test_clicking_the_right_button_is_rewarded_and_named(suite, new_session):
    task, session = started(suite, new_session)
    assert session.evaluate("core.EPISODE_MAX_TIME") == 1_800_000
    target = next(b for b in session.evaluate(_BUTTONS) if f'"{b["text"]}"' in task.prompt)
    effect = session.execute(MouseClick(x=target["x"], y=target["y"]))
    assert effect.ok and effect.element.tag == "button"
    assert (effect.element.role, effect.element.name) == ("button", "submit")
    got = reward(suite, session, task)
    assert got["done"] is True and got["raw_reward"] == 1 and got["reward"] > 0


@pytest.mark.browser
def test_clicking_a_wrong_button_is_not_rewarded(suite, new_session):
    task, session = started(suite, new_session)
    wrong = next(b for b in session.evaluate(_BUTTONS) if f'"{b["text"]}"' not in task.prompt)
    effect = session.execute(MouseClick(x=wrong["x"], y=wrong["y"]))
    assert effect.element.name == wrong["text"]
    got = reward(suite, session, task)
    assert got["done"] is True and got["reward"] <= 0


@pytest.mark.browser
def test_the_first_episode_outcome_survives_a_click_on_start(suite, new_session):
    task, session = started(suite, new_session)
    target = next(b for b in session.evaluate(_BUTTONS) if f'"{b["text"]}"' in task.prompt)
    session.execute(MouseClick(x=target["x"], y=target["y"]))
    session.evaluate("document.getElementById('sync-task-cover').click()")  # a new episode
    assert session.evaluate("WOB_DONE_GLOBAL") is False
    assert reward(suite, session, task)["raw_reward"] == 1


@pytest.mark.browser
def test_same_seed_gives_same_utterance_and_layout_in_fresh_contexts(suite, new_session):
    [task] = suite.tasks()
    layouts = []
    for _ in range(2):
        session = new_session()
        utterance = start_episode(session.page, SEED, url=task.start_url)  # a Playwright Page
        layouts.append(
            (
                utterance,
                session.evaluate(_BUTTONS),
                session.evaluate("document.getElementById('area').innerHTML"),
            )
        )
    assert layouts[0] == layouts[1] and layouts[0][0] == task.prompt
    other = new_session()
    assert start_episode(other, SEED + 1, url=task.start_url) != task.prompt


@pytest.mark.browser
def test_capture_off_miniwob_is_a_capture_error(suite, new_session, site):
    [task] = suite.tasks()
    session = new_session()
    session.goto(f"{site.base}/pages/page2.html")
    [piece] = suite.capture(session, task)
    assert piece.name == "capture_error" and "no MiniWoB page open" in piece.value_json


def test_the_server_serves_pages_and_stops():
    import urllib.request

    with MiniwobSuite("click-link") as own:
        url = own.task_url("click-link", 1)
        with urllib.request.urlopen(url) as response:
            assert b"genProblem" in response.read()
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)


def test_a_browser_that_hangs_up_mid_response_prints_nothing(tmp_path, capsys):
    """Chromium drops its favicon request while the 404 is written: no traceback on stderr
    (a recording's output is read by people and by CI), but a real server fault still shows."""
    server = serve_static(tmp_path)
    try:
        for hang_up in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")):
            try:
                raise hang_up
            except ConnectionError:
                server.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("a fault of ours")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 1))
        assert "ValueError: a fault of ours" in capsys.readouterr().err
    finally:
        server.shutdown()
        server.server_close()


def test_glob_selects_tasks_and_default_seeds_are_stable():
    own = MiniwobSuite("click-b*")
    assert own.names == ["click-button", "click-button-sequence"]
    assert MiniwobSuite("enter-text, click-b*").names == [
        "enter-text",
        "click-button",
        "click-button-sequence",
    ]
    assert default_seed("click-button") == default_seed("click-button") == 44284
    assert own.tasks_sha256 == MiniwobSuite("click-b*").tasks_sha256
    assert own.tasks_sha256 != MiniwobSuite("click-b*", "1").tasks_sha256


def test_seeds_parse_lists_and_ranges():
    assert parse_seeds("3,1-4, 9") == [3, 1, 2, 4, 9]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"suite": "miniwob:click-*,nothing-*"},
            "no MiniWoB task matches 'nothing-*' (e.g. miniwob:click-*)",
        ),
        (
            {"suite": "miniwob", "seeds": "1,x"},
            "bad --seeds '1,x': use integers and ranges, e.g. 1,2,10-19",
        ),
        (
            {"suite": "miniwob", "seeds": "9-2"},
            "bad --seeds range '9-2': at most 10000 seeds, low-high",
        ),
        (
            {"suite": "miniwob", "base": "http://x"},
            "--base applies to --tasks files; miniwob serves its own pages",
        ),
        ({}, "pass either --suite NAME or --tasks FILE (exactly one)"),
        (
            {"suite": "miniwob", "tasks_file": "t.json"},
            "pass either --suite NAME or --tasks FILE (exactly one)",
        ),
    ],
)
def test_bad_suite_options_are_one_line_errors(kwargs, message):
    with pytest.raises(OwnloopError) as caught:
        load_suite(**kwargs)
    assert str(caught.value) == message


@pytest.mark.browser
def test_prompts_read_once_are_cached_and_a_later_suite_launches_no_browser(
    chromium, tmp_path, monkeypatch
):
    monkeypatch.setenv("OWNLOOP_CACHE", str(tmp_path / "cache"))
    with MiniwobSuite("click-button,click-link", "5,6", browser=chromium) as first:
        read = first.tasks()
    [kept] = (tmp_path / "cache" / "miniwob-prompts").glob("click-button-*.json")
    assert json.loads(kept.read_text())["5"] == 'Click on the "submit" button.'
    # No Chromium at all: a browser launch would fail, so these prompts came from the cache.
    with MiniwobSuite("click-button,click-link", "5,6", chromium=str(tmp_path / "none")) as later:
        assert [(t.task_id, t.prompt) for t in later.tasks()] == [
            (t.task_id, t.prompt) for t in read
        ]
    with pytest.raises(OwnloopError, match="no Chromium at"):  # a seed never read needs one
        MiniwobSuite("click-button", "7", chromium=str(tmp_path / "none")).tasks()


@pytest.mark.browser
def test_a_damaged_prompt_cache_is_read_again_in_a_browser(chromium, tmp_path, monkeypatch):
    monkeypatch.setenv("OWNLOOP_CACHE", str(tmp_path / "cache"))
    MiniwobSuite("click-button", str(SEED), browser=chromium).tasks()
    [kept] = (tmp_path / "cache" / "miniwob-prompts").glob("click-button-*.json")
    kept.write_text('{"5": ["not", "a", "prompt"]')  # torn JSON
    [task] = MiniwobSuite("click-button", str(SEED), browser=chromium).tasks()
    assert task.prompt == 'Click on the "submit" button.'
    assert json.loads(kept.read_text()) == {"5": task.prompt}


def test_page_links_are_the_scripts_and_stylesheets_a_page_loads():
    html = (html_dir() / "miniwob" / "click-dialog.html").read_text(encoding="utf-8")
    assert page_links(html) == [
        "../core/core.css",
        "../core/jquery-ui/jquery-ui.min.css",
        "../core/core.js",
        "../core/d3.v3.min.js",
        "../core/jquery-ui/external/jquery/jquery.js",
        "../core/jquery-ui/jquery-ui.min.js",
        "../core/jquery-ui-hacks.js",
        "../common/ui_utils.js",
    ]
    assert page_links('<link rel="icon" href="x.ico"><script>inline()</script>') == []
