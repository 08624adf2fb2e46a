"""The Python API (``ownloop.open_store``) on a store ``ownloop demo`` recorded, checked against
the CLI's answers on the same store; the README's example (the same in docs/python-api.md) runs
as written."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ownloop
from ownloop.errors import OwnloopError
from ownloop.store import MissingBlob
from ownloop.store import open_store as open_raw_store
from ownloop.testing.synthetic import Session, agent_step, click, finish, write_sessions

ROOT = Path(__file__).resolve().parents[1]


def _ownloop(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ownloop", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder where ``ownloop demo --tasks 3 --judge`` ran: its store is ./ownloop-data."""
    folder = tmp_path_factory.mktemp("demo")
    out = _ownloop(folder, "demo", "--tasks", "3", "--judge")
    # The scripted judge judged the run, three repeats and the controls, and reported on itself.
    assert "judged 3 of 3 sessions x3 with judge final" in out
    assert "agreement with the rule graders over 3 sessions: " in out
    assert "self-agreement over repeats: " in out and "control, blank screenshots: " in out
    yield folder


@pytest.fixture
def store_dir(demo: Path, tmp_path: Path) -> Path:
    shutil.copytree(demo / "ownloop-data", tmp_path / "ownloop-data")
    return tmp_path / "ownloop-data"


def _readme_example() -> str:
    section = (ROOT / "README.md").read_text().split("\n## Python API\n", 1)[1].split("\n## ")[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    page = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "python-api.md").read_text(), re.S)
    assert len(blocks) == 1 and page == blocks
    return str(blocks[0])


@pytest.mark.browser
@pytest.mark.slow
def test_the_readme_example_runs_after_the_demo(store_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _readme_example()],
        cwd=store_dir.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    runs = json.loads(lines[0].replace("'", '"'))
    assert [(r["n"], r["score"]) for r in runs] == [(3, 1.0)]
    assert runs[0]["run_id"].startswith("demo-")
    columns = "['session_id', 'run_id', 'task_id', 'agent']"
    assert lines[1] == f"3 finished sessions with columns {columns}"
    assert re.fullmatch(
        r"\w+  click-button-\d+  finished  \d steps  pass 1\.00 \(miniwob\).*", lines[2]
    )
    assert lines[-2].endswith(" True")  # the first browser operation, the latest grade
    assert lines[-1] == "(1280, 800)"


@pytest.mark.browser
@pytest.mark.slow
def test_sessions_and_sql_are_what_the_cli_says(store_dir: Path) -> None:
    store = ownloop.open_store(store_dir)
    cli_rows = json.loads(
        _ownloop(
            store_dir.parent,
            "--store",
            str(store_dir),
            "sql",
            "select session_id, task_id, status from sessions order by started_at desc",
            "--format",
            "json",
        )
    )
    run_id = store.sql("select run_id from runs").to_dicts()[0]["run_id"]
    every = store.sessions(run=run_id)
    assert [(r["session_id"], r["task_id"], r["status"]) for r in every.to_dicts()] == [
        (r["session_id"], r["task_id"], r["status"]) for r in cli_rows
    ]
    assert every.to_arrow().num_rows == len(every) == 3
    assert list(every.to_pandas()["session_id"]) == [r["session_id"] for r in cli_rows]

    first, second = (r["task_id"] for r in cli_rows[:2])
    assert [r["task_id"] for r in store.sessions(task=[first, second])] == [first, second]
    assert len(store.sessions(run=run_id, passed=False)) == 0
    assert len(store.sessions(parent=None, limit=2)) == 2
    bound = store.sql("select task_id from sessions where task_id = $t", {"t": first})
    assert bound.to_dicts() == [{"task_id": first}]

    with pytest.raises(
        OwnloopError,
        match=r"^sessions has no column 'colour'\. Filter on one "
        r"of: session_id, run_id, task_id, .* \(or run, task, session, parent\)$",
    ):
        store.sessions(colour="red")
    with pytest.raises(OwnloopError, match="only reads: DELETE statements are not allowed"):
        store.sql("delete from sessions")


@pytest.mark.browser
@pytest.mark.slow
def test_a_session_is_the_folded_session_with_its_screenshots(store_dir: Path) -> None:
    store = ownloop.open_store(store_dir)
    session = store.session("enter-text")
    shown = _ownloop(store_dir.parent, "--store", str(store_dir), "show", "enter-text", "--json")
    assert session.to_json() == shown.rstrip("\n")
    assert session.task_id.startswith("enter-text-") and session.status == "finished"
    assert [a for _, a in session.actions] == [a for s in session.steps for a in s.actions]
    assert session.effects and all(e.ok for e in session.effects)
    assert session.grades[-1].passed and session.viewport == (1280, 800)

    raw = open_raw_store(store_dir)
    assert sorted(session.screenshots) == [s.step for s in session.steps if s.screenshot]
    for step in session.steps:
        assert step.screenshot is not None
        image = session.screenshots[step.step]
        assert image.size == (1280, 800) and image.format == "PNG"
        assert session.screenshot(step.step).tobytes() == image.tobytes()
        assert raw.get_blob(step.screenshot.sha256)  # the image is the recorded blob
    with pytest.raises(KeyError, match="no screenshot at step 99"):
        session.screenshots[99]

    page = session._repr_html_()
    assert page.count("<img src='data:image/jpeg;base64,") == len(session.steps)
    assert f"<td style='text-align:left'>{session.session_id}</td>" in page

    # A screenshot whose blob is gone is a line in its place, not an error.
    sha = session.steps[0].screenshot.sha256  # type: ignore[union-attr]
    held = [p for p in (store_dir / "blobs" / sha[:2]).iterdir() if p.name.startswith(sha)]
    assert held  # the PNG, or its lossless WebP once compacted
    for path in held:
        path.unlink()
    with pytest.raises(MissingBlob):
        store.session(session.session_id).screenshots[session.steps[0].step]
    assert "no screenshot: " in store.session(session.session_id)._repr_html_()


HOSTILE = "<script>alert(1)</script></table><img src=x onerror=alert(2)>&amp;"
ESCAPED = (
    "&lt;script&gt;alert(1)&lt;/script&gt;&lt;/table&gt;&lt;img src=x onerror=alert(2)&gt;&amp;amp;"
)


def test_the_notebook_views_escape_every_recorded_text(tmp_path: Path) -> None:
    raw = open_raw_store(tmp_path / "store")
    write_sessions(
        raw,
        Session(
            "s-hostile",
            task_id=f"task-{HOSTILE}",
            answer=HOSTILE,
            steps=(
                agent_step(actions=(click(),), thought=HOSTILE, url=f"http://x.test/{HOSTILE}"),
                agent_step(actions=(finish(HOSTILE),), thought="done"),
            ),
        ),
    )
    store = ownloop.open_store(tmp_path / "store")
    session = store.session("s-hostile")
    assert session.steps[0].thought == HOSTILE
    result = store.sessions()
    for page in (
        session._repr_html_(),
        result._repr_html_(),
        store.sql("select ? as x", [HOSTILE])._repr_html_(),
    ):
        assert "<script>" not in page and "<img src=x" not in page
        assert ESCAPED in page
    # The synthetic screenshot is not an image: said in its cell, the rest still drawn.
    assert session._repr_html_().count("no screenshot: ") == 2


def test_open_store_reads_only_a_store_that_is_there(tmp_path: Path) -> None:
    with pytest.raises(OwnloopError, match="there is no store at"):
        ownloop.open_store(tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(OwnloopError, match="is not an ownloop store"):
        ownloop.open_store(tmp_path / "empty")


def test_import_ownloop_loads_the_api_only_when_used() -> None:
    heavy = ("ownloop.api", "duckdb", "pyarrow", "PIL")
    code = (
        f"import sys, ownloop; print(*(m in sys.modules for m in {heavy!r})); "
        "ownloop.open_store; print('ownloop.api' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"] * len(heavy) + ["True"]
