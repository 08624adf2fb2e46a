"""Viewer fixtures: one real recorded store (the MiniWoB expert, two tasks) with the synthetic
sessions of ``synthetic.py`` appended, the viewer serving it, and a fresh page per test.

The store is recorded once per test run (session scope); tests only read it, except the one that
appends while the viewer runs, which writes a run of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver.endpoint import make_server
from ownloop.store import open_store
from ownloop.view.server import ViewServer
from tests.view.synthetic import ViewStore, append_synthetic


@pytest.fixture(scope="session")
def view_store(tmp_path_factory: pytest.TempPathFactory) -> ViewStore:
    """A real recording of click-button and enter-text by the MiniWoB expert, plus synthetic
    sessions."""
    root = tmp_path_factory.mktemp("view") / "store"
    with make_server("miniwob", "uitars") as url:
        result = CliRunner().invoke(
            cli,
            [
                "--store",
                str(root),
                "record",
                "uitars",
                "--suite",
                "miniwob:click-button,enter-text",
                "--endpoint",
                url,
                "--model",
                "expert",
                "--settle",
                "0.1",
                "--run",
                "rec",
                "--workers",
                "2",
            ],
            catch_exceptions=False,
        )
    assert result.exit_code == 0, result.output
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
