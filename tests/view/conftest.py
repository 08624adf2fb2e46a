"""Viewer fixtures: one real recorded store (the MiniWoB expert, two tasks) with the synthetic
sessions of ``synthetic.py`` appended, the viewer serving it, and a fresh page per test.

The store is recorded once per test run (session scope: a copy of ``uitars_store``); tests only
read it, except the one that appends while the viewer runs, which writes a run of its own.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ownloop.store import open_store
from ownloop.view.server import ViewServer
from tests.view.synthetic import ViewStore, append_synthetic


@pytest.fixture(scope="session")
def view_store(tmp_path_factory: pytest.TempPathFactory, uitars_store: Path) -> ViewStore:
    """A real recording of click-button and enter-text by the MiniWoB expert (run r1: a copy of
    the session's ``uitars_store``, recorded once for every module that wants it), plus
    synthetic sessions."""
    root = tmp_path_factory.mktemp("view") / "store"
    shutil.copytree(uitars_store, root)
    store = open_store(root)
    hostile, replay, gestures = append_synthetic(store)
    return ViewStore(store, root, hostile, replay, gestures)


@pytest.fixture(scope="session")
def viewer(view_store: ViewStore) -> Iterator[str]:
    """The viewer over ``view_store`` on an ephemeral port; yields its base URL."""
    with ViewServer(view_store.store, port=0) as url:
        yield url


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A fresh page in its own context on the shared Chromium; fails the test on any dialog."""
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    yield page
    context.close()
    assert not dialogs, f"a dialog opened: {dialogs}"
