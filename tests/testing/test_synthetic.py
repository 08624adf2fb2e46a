"""The synthetic-session builder the tests and benches share (``ownloop.testing.synthetic``)."""

from __future__ import annotations

from pathlib import Path

from ownloop.agents import make_agent
from ownloop.store import events as E
from ownloop.store import open_store
from ownloop.testing.synthetic import (
    Session,
    Step,
    agent_step,
    at,
    click,
    finish,
    scroll,
    session_events,
    write_sessions,
)


def test_written_sessions_index_as_recorded_and_a_reparse_agrees(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store", fsync=False)
    steps = [
        agent_step([click()]),
        agent_step([scroll()], failed_first="junk"),
        agent_step([finish()]),
    ]
    write_sessions(
        store, Session("s1", steps), Session("s2", [agent_step([finish("no")])], run_id="r2")
    )
    rows = store.sql("select session_id, run_id, steps, passed from sessions order by 1").rows
    assert rows == [("s1", "r1", 3, True), ("s2", "r2", 1, True)]
    events = store.session_events("s1")
    agent = make_agent("uitars")
    for parsed in (e for e in events if isinstance(e, E.ActionParsed) and e.error is None):
        call = next(
            e for e in events if isinstance(e, E.ModelCalled) and e.call_id == parsed.call_id
        )
        assert call.response is not None
        assert agent.parse(call.response, (1280, 800)).actions == parsed.actions
    calls = [(e.call_id, e.attempt) for e in events if isinstance(e, E.ModelCalled)]
    assert calls == [("s1-1-1", 1), ("s1-2-0", 1), ("s1-2-1", 2), ("s1-3-1", 1)]
    scrolled = next(e for e in events if isinstance(e, E.ActionParsed) and e.call_id == "s1-2-1")
    ops = [e.op for e in events if isinstance(e, E.BrowserActed) and e.step == 2]
    assert ops == [op for action in scrolled.actions for op in agent.translate(action)] != []


def test_times_follow_the_session_and_a_tick_of_nothing_puts_a_step_at_one_instant() -> None:
    spec = Session("s", [Step(actions=[click()], ops=[E.MouseClick(x=1, y=2)])], start=10)
    spread = [e.at for e in session_events(spec, "ab" * 32)]
    assert spread == sorted(spread) and spread[0] == at(10)
    assert len(set(spread[:-3])) == len(spread) - 3  # the evidence is captured at the end
    flat = Session("s", spec.steps, start=10, tick=0.0, step_seconds=0.5, end=1.0)
    times = [e.at for e in session_events(flat, "ab" * 32)]
    assert times == [at(10), *[at(10.5)] * 4, at(11), at(11), at(11)]
