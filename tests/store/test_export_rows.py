"""``export_views``: each view's Parquet file holds the view's rows, and the count it reports
is the count written (COPY's own answer, not a second run of the view)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from ownloop.store import Store
from ownloop.store.export import export_views
from tests.store.test_seal import write_run


def test_each_file_holds_the_views_rows_and_says_how_many(store: Store, tmp_path: Path) -> None:
    write_run(store, "r1", ("t1", "t2", "t3"))
    write_run(store, "r2", ("t1", "t4"), end_run=False)
    files = export_views(store, tmp_path / "all")
    assert {f.view for f in files} >= {"sessions", "steps", "runs", "journal", "actions"}
    for file in files:
        table = pq.read_table(file.path)
        want = store.sql(f'select * from "{file.view}"')
        assert file.rows == table.num_rows == len(want.rows), file.view
        assert table.column_names == want.columns
    by_view = {f.view: f.rows for f in files}
    assert by_view["sessions"] == 5 and by_view["runs"] == 2


def test_a_runs_export_keeps_its_rows_only(store: Store, tmp_path: Path) -> None:
    write_run(store, "r1", ("t1", "t2", "t3"))
    write_run(store, "r2", ("t1", "t4"))
    files = {f.view: f for f in export_views(store, tmp_path / "r2", "r2")}
    assert files["sessions"].rows == 2 == pq.read_table(files["sessions"].path).num_rows
    ids = pq.read_table(files["steps"].path).column("session_id").to_pylist()
    assert ids and all(i.startswith("r2-") for i in ids)
    assert files["runs"].rows == 1
