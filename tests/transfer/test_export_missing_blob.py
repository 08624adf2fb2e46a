"""An export whose store lacks a screenshot's blob writes the rest and names the file it skipped,
in both layouts (session folders and OSWorld's)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ownloop.store import Store, open_store
from ownloop.testing.synthetic import Session, Step, write_sessions
from ownloop.transfer.batches import ExportResult
from ownloop.transfer.exporter import export_session_dirs
from ownloop.transfer.osworld_export import export_osworld

_ABSENT = "0" * 64  # a screenshot the store never kept


@pytest.mark.parametrize(
    ("export", "screen"),
    [
        (export_session_dirs, "task-1/screens/step_01.png"),
        (export_osworld, "pyautogui/screenshot/synthetic/browser/task-1/step_0.png"),
    ],
)
def test_an_export_names_the_screenshot_the_store_lacks(
    tmp_path: Path, export: Callable[[Store, str, Path], ExportResult], screen: str
) -> None:
    store = open_store(tmp_path / "store")
    write_sessions(store, Session("s1", steps=[Step(sha256=_ABSENT)]))
    out = tmp_path / "out"
    done = export(store, "r1", out)
    assert done.skipped == [f"skipped {out / screen} (blob {_ABSENT[:12]} missing from the store)"]
    assert not (out / screen).exists()
