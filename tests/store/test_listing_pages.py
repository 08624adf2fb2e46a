"""The viewer's runs and sessions tables are sorted, filtered and cut into pages in SQL: every
page is the matching slice of the whole listing, with the whole listing's count and choices."""

from __future__ import annotations

from ownloop.store import Store
from ownloop.store import events as E
from ownloop.store.queries import Page, run_listing, session_listing
from tests.store.conftest import at
from tests.store.test_seal import write_run


def seven_runs(store: Store) -> None:
    for n in range(6):
        write_run(store, f"r{n}", tuple(f"t{k}" for k in range(n + 1)), end_run=n % 2 == 0)
    with store.stream("other-agent") as stream:  # a run of another agent, no session yet
        stream.append([E.RunStarted(at=at(99), run_id="rx", agent="fara7b", model="m2")])


def test_run_pages_are_slices_of_the_whole_listing(store: Store) -> None:
    seven_runs(store)
    for sort, descending in (("started_at", True), ("sessions", False), ("run_id", True)):
        whole = run_listing(store, {}, Page(sort, descending, 100, 0))
        assert whole.total == len(whole.page.rows) == 7
        pages = [run_listing(store, {}, Page(sort, descending, 3, offset)) for offset in (0, 3, 6)]
        assert [row for p in pages for row in p.page.rows] == whole.page.rows
        assert {p.total for p in pages} == {7}
        assert all(p.choices == whole.choices for p in pages)
    assert whole.choices == {"agent": ["fara7b", "uitars"], "model": ["m", "m2"]}
    past = run_listing(store, {}, Page("run_id", False, 3, 30))
    assert past.page.rows == [] and past.total == 7


def test_a_filtered_run_page_counts_only_what_matches(store: Store) -> None:
    seven_runs(store)
    uitars = run_listing(store, {"agent": "uitars"}, Page("run_id", False, 4, 4))
    ids = [row[uitars.page.columns.index("run_id")] for row in uitars.page.rows]
    assert ids == ["r4", "r5"] and uitars.total == 6
    other = run_listing(store, {"model": "m2"}, Page("run_id", False, 10, 0))
    assert [row[0] for row in other.page.rows] == ["rx"] and other.total == 1
    assert run_listing(store, {"agent": None}, Page("run_id", False, 10, 0)).total == 0


def test_session_pages_are_slices_of_the_whole_listing(store: Store) -> None:
    seven_runs(store)
    whole = session_listing(store, {}, Page("started_at", True, 100, 0))
    assert whole.total == len(whole.page.rows) == 21
    pages = [session_listing(store, {}, Page("started_at", True, 5, o)) for o in range(0, 25, 5)]
    assert [row for p in pages for row in p.page.rows] == whole.page.rows
    assert {p.total for p in pages} == {21}
    run5 = session_listing(store, {"run": "r5"}, Page("session_id", False, 4, 4))
    assert [row[0] for row in run5.page.rows] == ["r5-t4", "r5-t5"] and run5.total == 6
