"""``Store.sql(..., first=N)``: only the first N rows are fetched as Python values, the others
are counted (what a table that shows N rows needs, in time that does not grow with the rest)."""

from __future__ import annotations

from ownloop.store import Store
from tests.store.test_seal import write_run


def test_first_rows_are_the_full_results_first_and_the_total_counts_them_all(
    store: Store,
) -> None:
    write_run(store, "r1", tuple(f"t{n}" for n in range(30)))
    query = "select * from sessions order by session_id"
    every = store.sql(query)
    cut = store.sql(query, first=7)
    assert (cut.columns, cut.types) == (every.columns, every.types)
    assert cut.rows == every.rows[:7] and len(every.rows) == 30
    assert cut.total == 30 and every.total is None
    assert cut.caption(7) == every.caption(7)


def test_first_counts_a_large_rest_and_a_short_result_whole(store: Store) -> None:
    write_run(store, "r1", ("t1",))
    big = store.sql("select range as n from range(250000)", first=3)
    assert big.rows == [(0,), (1,), (2,)] and big.total == 250_000
    small = store.sql("select range as n from range(2)", first=3)
    assert small.rows == [(0,), (1,)] and small.total == 2
    none = store.sql("select 1 as n where false", first=3)
    assert none.rows == [] and none.total == 0
    assert store.sql("select 1 as a; select 2 as b", first=1).rows == [(2,)]
