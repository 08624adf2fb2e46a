"""A new index is a copy of the empty index built once per format (``store/template.py``).

The copy must be the index the old way built in place (same tables, views, meta and rows, the
store's archive folders read), and a template that is damaged, built for another schema or in a
cache folder that cannot be written must never change what the index holds.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ownloop.store import Store, open_store
from ownloop.store.archive import archive_runs
from ownloop.store.index import _BLOCK_SIZE, _template_key
from ownloop.store.seal import seal_run
from tests.store.conftest import session_recorder
from tests.store.test_seal import write_run

Catalog = dict[str, list[tuple[Any, ...]]]


def catalog(store: Store) -> Catalog:
    """Every table's and view's definition, the meta rows and the sessions, as the index holds
    them (read straight from its file)."""
    con = duckdb.connect(str(store.index_path), read_only=True)
    try:
        queries = {
            "tables": "select schema_name, table_name, sql from duckdb_tables()",
            "views": "select schema_name, view_name, sql from duckdb_views() where not internal",
            "columns": "select schema_name, table_name, column_name, data_type, column_index "
            "from duckdb_columns()",
            "meta": "select * from meta",
            "streams": "select * from streams",
            "sessions": "select * from sessions",
            "bootstraps": "select * from score_bootstraps",
        }
        rows = {name: con.execute(sql).fetchall() for name, sql in queries.items()}
        return {name: sorted(found, key=repr) for name, found in rows.items()}
    finally:
        con.close()


def templates(cache: Path) -> list[Path]:
    return sorted((cache / "index-templates").glob("index-*.duckdb"))


def small_store(root: Path) -> Store:
    store = open_store(root, fsync=False)
    record = session_recorder(store)
    for n in range(3):
        record(f"s{n}", t=n * 10.0)
    return store


def built_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Catalog:
    """The catalog of a store like ``small_store`` whose index was built with no cache folder."""
    monkeypatch.setenv("OWNLOOP_CACHE", str(tmp_path / "a-file" / "cache"))
    (tmp_path / "a-file").write_text("not a folder")
    store = small_store(tmp_path / name)
    assert store.sync().rebuilt
    return catalog(store)


def test_a_new_index_is_the_template_copied_and_equals_one_built_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = built_in_place(tmp_path, monkeypatch, "in-place")
    cache = tmp_path / "cache"
    monkeypatch.setenv("OWNLOOP_CACHE", str(cache))
    first = small_store(tmp_path / "first")
    assert first.sync().rebuilt  # builds the template, then copies it
    [template] = templates(cache)
    assert template.name.startswith(f"index-{_template_key()}-")
    second = small_store(tmp_path / "second")
    assert second.sync().rebuilt
    assert templates(cache) == [template]  # copied, not built again
    assert catalog(first) == old
    assert catalog(second) == old
    assert second.sql("select count(*) from sessions").rows == [(3,)]
    # Its block size is the one a new index gets.
    con = duckdb.connect(str(second.index_path), read_only=True)
    size = con.execute("select block_size from pragma_database_size()").fetchone()
    con.close()
    assert size is not None and str(size[0]) == _BLOCK_SIZE


def _other_index(path: Path, fingerprint: str) -> bytes:
    """A DuckDB file that is an index of another schema: a table of its own, another
    fingerprint."""
    con = duckdb.connect(str(path))
    con.execute("create table meta (key VARCHAR primary key, value VARCHAR)")
    con.execute("insert into meta values ('fingerprint', ?)", [fingerprint])
    con.execute("create table not_ours (x INTEGER)")
    con.close()
    return path.read_bytes()


def test_a_damaged_template_is_removed_and_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = built_in_place(tmp_path, monkeypatch, "in-place")
    cache = tmp_path / "cache"
    monkeypatch.setenv("OWNLOOP_CACHE", str(cache))
    assert small_store(tmp_path / "first").sync().rebuilt
    [template] = templates(cache)
    # Another valid DuckDB file under the template's name: its bytes no longer hash to it.
    template.write_bytes(_other_index(tmp_path / "other.duckdb", "another"))
    store = small_store(tmp_path / "second")
    assert store.sync().rebuilt
    assert catalog(store) == old
    for path in templates(cache):  # the damaged one replaced by a sound one
        assert path.name.endswith(f"-{hashlib.sha256(path.read_bytes()).hexdigest()[:32]}.duckdb")
    # A torn template (half its bytes) is not used either.
    [template] = templates(cache)
    template.write_bytes(template.read_bytes()[: template.stat().st_size // 2])
    torn = small_store(tmp_path / "third")
    assert torn.sync().rebuilt
    assert catalog(torn) == old


def test_a_sound_template_of_another_schema_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole empty index whose bytes hash to its name, but of another schema (another
    fingerprint, a table of its own): the index is built in place, as the old way did."""
    old = built_in_place(tmp_path, monkeypatch, "in-place")
    cache = tmp_path / "cache"
    monkeypatch.setenv("OWNLOOP_CACHE", str(cache))
    assert small_store(tmp_path / "first").sync().rebuilt
    [template] = templates(cache)
    stale = tmp_path / "stale.duckdb"
    stale.write_bytes(template.read_bytes())
    con = duckdb.connect(str(stale))
    con.execute("update meta set value = 'another' where key = 'fingerprint'")
    con.execute("create table not_ours (x INTEGER)")
    con.close()
    data = stale.read_bytes()
    template.unlink()
    digest = hashlib.sha256(data).hexdigest()[:32]
    (template.parent / f"index-{_template_key()}-{digest}.duckdb").write_bytes(data)
    store = small_store(tmp_path / "store")
    result = store.sync()
    assert result.rebuilt and result.events > 0
    assert catalog(store) == old


def test_an_unwritable_cache_builds_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("OWNLOOP_CACHE", str(blocked / "cache"))
    store = small_store(tmp_path / "store")
    assert store.sync().rebuilt
    assert store.sql("select count(*) from sessions").rows == [(3,)]
    assert not list(tmp_path.glob("**/index-templates"))
    # No home, no XDG folder: still built in place.
    monkeypatch.delenv("OWNLOOP_CACHE")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(blocked))
    again = small_store(tmp_path / "again")
    assert again.sync().rebuilt
    assert catalog(again)["sessions"] == catalog(store)["sessions"]


def test_a_rebuild_from_the_template_reads_the_stores_archives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The template holds no store's archive folders: a rebuild from it reads them all the
    same, as an index built in place does."""
    store = open_store(tmp_path / "store", fsync=False)
    for run_id in ("r1", "r2"):
        write_run(store, run_id, ("t1", "t2"))
    assert seal_run(store, "r1").seal is not None
    archive_runs(store, ["r1"])
    monkeypatch.setenv("OWNLOOP_CACHE", str(tmp_path / "a-file" / "cache"))
    (tmp_path / "a-file").write_text("not a folder")
    store.rebuild_index()
    old = catalog(store)
    assert any("read_parquet" in str(sql) for _, _, sql in old["views"])
    monkeypatch.setenv("OWNLOOP_CACHE", str(tmp_path / "cache"))
    result = store.rebuild_index()
    assert templates(tmp_path / "cache")
    assert result.rebuilt
    assert catalog(store) == old
    assert store.sql("select count(distinct run_id) from sessions").rows == [(2,)]
