"""``export_views``: each view's Parquet file holds the view's rows, and the count it reports
is the count written (COPY's own answer, not a second run of the view)."""

from __future__ import annotations

import json
import subprocess
import sys
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


def test_every_file_reads_in_pyarrow_polars_and_pandas_with_json_as_text_and_utc_times(
    store: Store, tmp_path: Path
) -> None:
    """Issue 30: through the real CLI, the JSON columns arrive as strings (polars used to see
    Binary, where str.contains fails) and the timestamps as UTC instants in every reader."""
    import pandas as pd
    import polars as pl
    import pyarrow as pa

    write_run(store, "r1", ("t1", "t2"))
    store.sync()
    out = tmp_path / "pq"
    result = subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(store.root), "export"]
        + ["--format", "parquet", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    json_columns = 0
    for path in sorted(out.glob("*.parquet")):
        view = path.stem
        kinds = {name: kind for name, kind, *_ in store.sql(f'describe "{view}"').rows}
        arrow = pq.read_table(path)
        frame = pl.read_parquet(path)
        pandas = pd.read_parquet(path)
        assert frame.height == arrow.num_rows == len(pandas), view
        for name, kind in kinds.items():
            if kind == "JSON":
                json_columns += 1
                assert pa.types.is_string(arrow.schema.field(name).type), (view, name)
                assert frame.schema[name] == pl.String, (view, name)
                texts = frame.get_column(name).drop_nulls()
                assert texts.str.contains('[\\[{"0-9tfn]').all(), (view, name)
                assert pandas[name].dropna().str.len().ge(1).all()
                for text in texts.to_list():
                    json.loads(text)
            elif kind == "TIMESTAMP":
                assert arrow.schema.field(name).type.tz == "UTC", (view, name)
                assert str(frame.schema[name].time_zone) == "UTC", (view, name)
                assert str(pandas[name].dt.tz) == "UTC", (view, name)
    sessions = pq.read_table(out / "sessions.parquet").to_pylist()
    want = store.sql("select session_id, started_at from sessions").rows
    assert sorted(
        (r["session_id"], r["started_at"].replace(tzinfo=None)) for r in sessions
    ) == sorted(want)
    assert json_columns >= 20
