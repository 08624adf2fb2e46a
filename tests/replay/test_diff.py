"""Two sessions side by side: identical with itself, and where two recordings part ways."""

from __future__ import annotations

import io

from rich.console import Console

from ownloop.replay.diff import diff_sessions, diff_view
from ownloop.replay.fold import Session, fold
from ownloop.testing.synthetic import Session as Synthetic
from ownloop.testing.synthetic import agent_step, click, finish, session_events

SHA_A, SHA_B = "a" * 64, "b" * 64


def _session(spec: Synthetic, sha: str = SHA_A) -> Session:
    return fold(session_events(spec, sha))


BASE = Synthetic(
    "s1", steps=(agent_step([click()]), agent_step([click(100, 200)]), agent_step([finish()]))
)


def _printed(diff: object) -> str:
    console = Console(record=True, width=220, file=io.StringIO())
    console.print(diff_view(diff))  # type: ignore[arg-type]
    return console.export_text()


def test_a_session_with_itself_is_identical() -> None:
    session = _session(BASE)
    diff = diff_sessions(session, session)
    assert diff.identical and diff.first_difference is None
    assert [s.same for s in diff.steps] == [True, True, True]
    assert diff.summary() == (
        "identical: 3 steps with the same actions, URLs and screenshots, and the same outcome"
    )
    text = _printed(diff)
    assert "s1  vs  s1" in text and "identical: 3 steps" in text and "≠" not in text


def test_different_action_url_screenshot_and_outcome() -> None:
    other = Synthetic(
        "s2",
        steps=(
            agent_step([click()]),
            agent_step([click(300, 300)], url="http://site.test/other"),
            agent_step([finish("nope")]),
            agent_step([finish()]),
        ),
        answer="nope",
        grades=(("answer:contains:done", 0.0, False),),
    )
    diff = diff_sessions(_session(BASE), _session(other, SHA_B))
    assert not diff.identical and diff.first_difference == 1  # every screenshot differs
    step2 = diff.steps[1]
    assert (step2.same_actions, step2.same_url, step2.same_screenshot) == (False, False, False)
    assert diff.steps[3].actions_a == "" and not diff.steps[3].same
    assert not diff.same_outcome
    assert diff.summary() == (
        "different: 4 of 4 steps differ, first at step 1 (screenshot); the outcome differs"
    )
    text = _printed(diff)
    assert "http://site.test/other" in text and "(no step)" in text
    assert "finished pass 1.00 answer='done'" in text and "finished fail 0.00 answer='nope'" in text


def test_same_screenshots_different_action() -> None:
    other = Synthetic(
        "s3", steps=(agent_step([click()]), agent_step([click(101, 200)]), agent_step([finish()]))
    )
    diff = diff_sessions(_session(BASE), _session(other))
    assert diff.first_difference == 2
    assert diff.steps[1].what_differs() == ["actions"]
    assert diff.same_outcome
