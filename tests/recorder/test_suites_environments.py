"""Private environments plug in through the ``ownloop.environments`` entry-point group."""

from __future__ import annotations

import json
import textwrap
import urllib.request

import pytest

from ownloop.errors import OwnloopError
from ownloop.world.suites import Suite, load_suite

PLUGIN = """
from contextlib import contextmanager
from pathlib import Path

from ownloop.world.suites.environments import served_tasks
from tests.site.server import start_site

CALLS = []


@contextmanager
def serve():
    server = start_site()
    try:
        yield server.base
    finally:
        server.stop()


def environment(argument, *, base, seeds):
    CALLS.append((argument, base, seeds))
    return served_tasks(Path(__file__).with_name("env_tasks.json"), serve, name="demo")
"""


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A real installed distribution declaring the entry point, on sys.path."""
    info = tmp_path / "ownloop_demo_env-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ownloop-demo-env\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[ownloop.environments]\ndemo = ownloop_demo_env:environment\n"
    )
    (tmp_path / "ownloop_demo_env.py").write_text(textwrap.dedent(PLUGIN))
    (tmp_path / "env_tasks.json").write_text(
        json.dumps(
            {
                "setup": ["{BASE}/_admin/session-flags"],
                "capture": ["{BASE}/_admin/record"],
                "tasks": [{"task_id": "t1", "prompt": "Open the form", "start": "{BASE}/form"}],
            }
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    import sys

    sys.modules.pop("ownloop_demo_env", None)


def test_an_installed_environment_serves_its_own_tasks(installed):
    suite = load_suite(suite="demo:checkout-*", seeds="3")
    import ownloop_demo_env

    assert ownloop_demo_env.CALLS == [("checkout-*", None, "3")]
    assert isinstance(suite, Suite) and suite.name == "demo"
    with suite:
        [task] = suite.tasks()
        assert task.start_url.startswith("http://127.0.0.1:") and task.start_url.endswith("/form")
        with urllib.request.urlopen(task.setup_urls[0]) as response:
            assert json.load(response)["logged_in"] is True
    with pytest.raises(OSError):
        urllib.request.urlopen(task.setup_urls[0], timeout=2)


def test_an_unknown_suite_names_the_ways_to_get_one(installed):
    with pytest.raises(OwnloopError) as caught:
        load_suite(suite="shop")
    assert str(caught.value) == (
        "unknown suite 'shop'. Use miniwob[:GLOB], --tasks FILE, or install a package with an "
        "'ownloop.environments' entry point (found: demo)"
    )
