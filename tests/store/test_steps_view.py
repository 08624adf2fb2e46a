"""The steps view: one row per (session, step) that any step event mentions, with the latest
screenshot and parse (by time, then stream, then sequence number) and the parsed call's
response."""

from __future__ import annotations

from ownloop.store import Store
from ownloop.store import events as E
from tests.store.conftest import at


def shot(step: int, sha: str, t: float, session: str = "s") -> E.ScreenshotTaken:
    return E.ScreenshotTaken(
        at=at(t), run_id="r", session_id=session, step=step, sha256=sha, url=f"http://x/{sha}"
    )


def call(step: int, call_id: str, response: str, t: float) -> E.ModelCalled:
    return E.ModelCalled(
        at=at(t), run_id="r", session_id="s", step=step, call_id=call_id, response=response
    )


def parse(step: int, call_id: str, thought: str, t: float) -> E.ActionParsed:
    return E.ActionParsed(
        at=at(t),
        run_id="r",
        session_id="s",
        step=step,
        call_id=call_id,
        parser="p",
        thought=thought,
        actions=(E.Wait(),),
    )


def act(step: int, idx: int, url: str, t: float, ok: bool = True) -> E.BrowserActed:
    return E.BrowserActed(
        at=at(t),
        run_id="r",
        session_id="s",
        step=step,
        idx=idx,
        op=E.MouseClick(x=1, y=2),
        ok=ok,
        url_after=url,
    )


COLUMNS = (
    "step, screenshot_sha256, url, response, thought, call_id, calls, ops, op_errors, url_after"
)


def test_latest_screenshot_and_parse_win_and_the_parsed_call_gives_the_response(
    store: Store,
) -> None:
    with store.stream("a") as first:
        first.append(
            [
                shot(1, "old", 1),
                call(1, "c1", "first try", 2),
                call(1, "c2", "second try", 3),
                parse(1, "c1", "parsed the first", 4),
                act(1, 0, "http://x/after", 5),
                act(1, 1, "http://x/last", 6, ok=False),
            ]
        )
    with store.stream("b") as second:  # a later screenshot of step 1, from another stream
        second.append([shot(1, "new", 7)])
    rows = store.sql(f"select {COLUMNS} from steps where session_id = 's'").rows
    # the parse names c1: its response, not the step's last call's
    assert rows == [
        (1, "new", "http://x/new", "first try", "parsed the first", "c1", 2, 2, 1, "http://x/last")
    ]


def test_a_tie_in_time_goes_to_the_later_stream_then_the_later_line(store: Store) -> None:
    with store.stream("a") as first:
        first.append([shot(1, "a1", 1), shot(1, "a2", 1)])
    with store.stream("b") as second:
        second.append([shot(2, "b1", 1)])
    with store.stream("c") as third:
        third.append([shot(2, "c1", 1)])
    rows = store.sql("select step, screenshot_sha256 from steps order by step").rows
    assert rows == [(1, "a2"), (2, "c1")]


def test_a_step_any_kind_mentions_is_a_row(store: Store) -> None:
    with store.stream() as stream:
        stream.append(
            [
                call(1, "c1", "no parse", 1),  # only a call (say, the reply did not parse)
                act(2, 0, "http://x/2", 2),  # only an operation (say, a replay's)
                shot(3, "three", 3),  # only a screenshot (the last observation)
                parse(4, "c4", "no call recorded", 4),  # only a parse
            ]
        )
    rows = store.sql(f"select {COLUMNS} from steps where session_id = 's' order by step").rows
    assert rows == [
        (1, None, None, "no parse", None, None, 1, 0, 0, None),
        (2, None, None, None, None, None, 0, 1, 0, "http://x/2"),
        (3, "three", "http://x/three", None, None, None, 0, 0, 0, None),
        (4, None, None, None, "no call recorded", "c4", 0, 0, 0, None),
    ]


def test_sessions_do_not_mix(store: Store) -> None:
    with store.stream() as stream:
        stream.append([shot(1, "s1", 1, session="s"), shot(1, "t1", 2, session="t")])
    rows = store.sql("select session_id, step, screenshot_sha256 from steps order by all").rows
    assert rows == [("s", 1, "s1"), ("t", 1, "t1")]
