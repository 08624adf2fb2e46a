"""docs/sql.md documents every view and every column (the statistics' and the audit's views in
docs/statistics.md, which sql.md names); the README's command table lists the store's commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from ownloop.store import Store

_ROOT = Path(__file__).resolve().parents[2]
_README = _ROOT / "README.md"
_SQL = _ROOT / "docs" / "sql.md"


def _section() -> str:
    return _SQL.read_text() + (_ROOT / "docs" / "statistics.md").read_text()


def test_every_view_and_column_is_documented(store: Store) -> None:
    # The event tables read through views of their own names (hot rows + archived runs): those
    # are the tables of the "Tables" part, not views of this section.
    views = store.sql(
        "select view_name from duckdb_views() where not internal and schema_name = 'main' "
        "and view_name not in (select table_name from duckdb_tables() where schema_name = 'hot')"
    ).rows
    assert len(views) == 28
    section = _section()
    missing = []
    for (view,) in views:
        if f"**`{view}`**" not in section or f"`{view}`" not in _SQL.read_text():
            missing.append(view)
        for column in store.sql(f"select * from {view} limit 0").columns:
            if f"`{column}`" not in section:
                missing.append(f"{view}.{column}")
    assert missing == []


@pytest.mark.parametrize("command", ["ownloop sql", "ownloop verify", "ownloop index"])
def test_commands_table_lists_the_store_commands(command: str) -> None:
    assert f"| `{command}" in _README.read_text()
