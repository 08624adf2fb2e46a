"""A store the disk will not let us write: every command answers in one line, exit status 1.

Real file systems, no mocks: a tmpfs remounted read-only (``chmod`` does not stop root), a 2 MB
tmpfs filled to ENOSPC, a store path under a file, a ``journal`` that is a file. Reads of a
read-only store whose index is up to date still work.
"""

from __future__ import annotations

import errno
import io
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from PIL import Image

from ownloop.cli import cli
from ownloop.modelserver import ModelServer, Reply
from ownloop.store import events as E
from ownloop.store import open_store
from ownloop.store.disk import StoreNotWritable, disk_error
from tests.fullfs import fill, remount, small_tmpfs
from tests.transfer.conftest import step_lines, summary, write_folder

_AT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
_FULL = (
    "is full. Free some space, then run the same command again (what is already recorded is kept)"
)


def _noise_png(seed: int, size: tuple[int, int] = (160, 160)) -> bytes:
    """A PNG that does not compress (~75 KB): one screenshot that cannot fit a full disk."""
    rng = random.Random(seed)
    image = Image.frombytes(
        "RGB", size, bytes(rng.getrandbits(8) for _ in range(size[0] * size[1] * 3))
    )
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _make_store(root: Path) -> Path:
    """A store with one run and one graded session of one step (one blob)."""
    store = open_store(root, fsync=False)
    sha = store.put_blob(b"not really a png")
    with store.stream("s1") as stream:
        stream.append(
            [
                E.RunStarted(at=_AT, run_id="r1", agent="uitars", model="m"),
                E.SessionStarted(
                    at=_AT,
                    run_id="r1",
                    session_id="a",
                    agent="uitars",
                    task=E.Task(task_id="t", prompt="p", start_url="http://x/"),
                ),
                E.ScreenshotTaken(at=_AT, run_id="r1", session_id="a", step=1, sha256=sha),
                E.SessionEnded(
                    at=_AT, run_id="r1", session_id="a", status="finished", steps=1, answer="41"
                ),
                E.SessionGraded(at=_AT, run_id="r1", session_id="a", grader="g", score=0.5),
            ]
        )
    return root


def _harness_folder(root: Path, screens: int = 3) -> Path:
    """A uitars result folder (the form ``ownloop import`` reads) with incompressible screens."""
    write_folder(
        root / "task-1",
        summary("task-1", score=1.0),
        step_lines("uitars", "http://127.0.0.1:8312/shop"),
        {n: _noise_png(n) for n in range(1, screens + 1)},
    )
    return root


def _files(root: Path) -> dict[str, bytes]:
    """Every file of the store but the index's own, with its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith("index.")
    }


def _leftovers(root: Path) -> list[str]:
    """Temporary files a failed write left behind (blob, manifest, Parquet temps)."""
    return [str(p) for p in root.rglob("*") if p.name.endswith(".tmp")]


def run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", str(root), *args])


def assert_one_line_error(result: Result, expected: str | None = None) -> str:
    """Exit status 1 from a click error (not an exception), and exactly one line of output."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    if expected is not None:
        assert lines[0] == f"Error: {expected}"
    return lines[0]


# --- a read-only store (a tmpfs remounted read-only) -----------------------------------------

# Every command that only reads; they must still work when the index is up to date.
READS = [
    ("sessions",),
    ("sql", "select session_id, score from sessions"),
    ("verify",),
    ("index",),
    ("show", "a"),
    ("replay", "a"),
    ("diff", "a", "a"),
]


@pytest.fixture(scope="module")
def read_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A store with an up-to-date index on a file system mounted read-only."""
    mount = tmp_path_factory.mktemp("ro") / "fs"
    with small_tmpfs(mount, size="8m"):
        root = _make_store(mount / "store")
        assert run(root, "index").exit_code == 0
        remount(mount, read_only=True)
        yield root


@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a))
@pytest.mark.slow
def test_a_read_only_store_answers_reads(read_only: Path, args: tuple[str, ...]) -> None:
    result = run(read_only, *args)
    assert result.exit_code == 0, result.output
    assert result.exception is None


def test_a_read_only_store_exports_and_reports_elsewhere(read_only: Path, tmp_path: Path) -> None:
    exported = run(read_only, "export", "--run", "r1", "--out", str(tmp_path / "out"))
    assert exported.exit_code == 0, exported.output
    assert (tmp_path / "out").is_dir()
    reported = run(read_only, "report", "a", "--out", str(tmp_path / "a.html"))
    assert reported.exit_code == 0, reported.output
    assert (tmp_path / "a.html").stat().st_size > 0


def test_rebuilding_the_index_of_a_read_only_store_is_one_line(read_only: Path) -> None:
    before = _files(read_only)
    assert_one_line_error(
        run(read_only, "index", "--rebuild"),
        f"the store {read_only} is read-only and its index cannot be rebuilt there: run "
        f"`ownloop --store {read_only} index` where the store is writable, or copy it to a "
        "writable folder and pass --store DIR",
    )
    assert _files(read_only) == before
    assert run(read_only, "sql", "select count(*) from sessions").exit_code == 0


@pytest.mark.parametrize(
    "args",
    [
        ("regrade", "--run", "r1", "--grader", "answer:exact:42"),
        ("import", "{src}", "--agent", "uitars", "--run", "imp"),
    ],
    ids=["regrade", "import"],
)
def test_writes_to_a_read_only_store_are_one_line(
    read_only: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    source = _harness_folder(tmp_path / "src", screens=1)
    line = assert_one_line_error(run(read_only, *(a.format(src=source) for a in args)))
    assert "read-only" in line.lower() and str(read_only) in line


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        (
            "record",
            "uitars",
            "--suite",
            "miniwob:click-button",
            "--endpoint",
            "{endpoint}",
            "--model",
            "m",
            "--workers",
            "1",
            "--retries",
            "0",
        ),
        ("demo", "--tasks", "1", "--workers", "1"),
    ],
    ids=["record", "demo"],
)
def test_recording_into_a_read_only_store_is_one_line(
    read_only: Path, args: tuple[str, ...]
) -> None:
    # An endpoint that answers: record checks it before it writes anything.
    with ModelServer(lambda request: Reply("Action: finished(content='')")) as endpoint:
        result = run(read_only, *(a.format(endpoint=endpoint) for a in args))
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "read-only" in errors[0].lower(), result.output


def test_an_out_of_date_index_on_a_read_only_store_says_so(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs", size="8m") as mount:
        root = _make_store(mount / "store")  # never indexed
        remount(mount, read_only=True)
        for args in (("sql", "select 1"), ("sessions",), ("show", "a"), ("index",)):
            assert_one_line_error(
                run(root, *args),
                f"the store {root} is read-only and its index is out of date: run `ownloop "
                f"--store {root} index` where the store is writable, or copy it to a writable "
                "folder and pass --store DIR",
            )
        assert run(root, "verify").exit_code == 0  # the journal is still readable


# --- a store path that cannot be a folder ----------------------------------------------------

ALL = [
    ("sessions",),
    ("sql", "select 1"),
    ("verify",),
    ("index",),
    ("index", "--rebuild"),
    ("show", "a"),
    ("replay", "a"),
    ("regrade", "--run", "r1"),
    ("diff", "a", "b"),
    ("import", "{src}", "--agent", "uitars"),
    ("export", "--run", "r1", "--out", "{out}"),
    ("report", "a", "--out", "{out}.html"),
    (
        "record",
        "uitars",
        "--suite",
        "miniwob",
        "--endpoint",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
    ),
    ("demo", "--tasks", "1"),
]


def _args(args: tuple[str, ...], tmp_path: Path) -> list[str]:
    source = tmp_path / "src"
    if not source.exists():
        _harness_folder(source, screens=1)
    return [a.format(src=source, out=tmp_path / "out") for a in args]


@pytest.mark.parametrize("args", ALL, ids=lambda a: " ".join(a[:2]))
def test_a_store_under_a_file_is_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "somefile").write_text("not a folder")
    assert_one_line_error(
        run(tmp_path / "somefile" / "sub", *_args(args, tmp_path)),
        f"{tmp_path}/somefile/sub cannot be a folder: {tmp_path}/somefile is a file. Pass --store "
        "DIR naming a folder",
    )
    assert (tmp_path / "somefile").read_text() == "not a folder"


@pytest.mark.parametrize("args", ALL, ids=lambda a: " ".join(a[:2]))
def test_a_store_that_is_a_file_is_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "somefile").write_text("not a folder")
    assert_one_line_error(
        run(tmp_path / "somefile", *_args(args, tmp_path)),
        f"{tmp_path}/somefile is a file, not a store directory. Pass --store DIR",
    )


@pytest.mark.parametrize("part", ["journal", "blobs"])
@pytest.mark.parametrize("args", ALL, ids=lambda a: " ".join(a[:2]))
def test_a_journal_that_is_a_file_is_an_error(
    tmp_path: Path, args: tuple[str, ...], part: str
) -> None:
    root = tmp_path / "store"
    root.mkdir()
    (root / part).write_text("where did the folder go?")
    assert_one_line_error(
        run(root, *_args(args, tmp_path)),
        f"{root}/{part} is a file, but a store keeps a folder there: {root} is damaged or not an "
        "ownloop store. Move that file away, or pass --store DIR",
    )


# --- a full disk (a small tmpfs filled to ENOSPC) ---------------------------------------------


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A store with an up-to-date index on an 8 MB tmpfs (the empty index alone takes 2 MB), and
    a filler file that fills it."""
    with small_tmpfs(tmp_path / "fs", size="8m") as mount:
        root = _make_store(mount / "store")
        assert run(root, "index").exit_code == 0
        yield root, mount / "filler"


@pytest.mark.slow
def test_import_on_a_full_disk_is_one_line_and_leaves_no_temp_file(
    full_disk: tuple[Path, Path], tmp_path: Path
) -> None:
    root, filler = full_disk
    source = _harness_folder(tmp_path / "src")
    before = _files(root)
    fill(filler)
    # Room for the run's first journal lines but not for a screenshot: the blob write fails.
    os.truncate(filler, filler.stat().st_size - 16 * 1024)
    line = assert_one_line_error(run(root, "import", str(source), "--agent", "uitars"))
    assert line.endswith(_FULL), line
    assert _leftovers(root) == []
    after = _files(root)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing recorded is lost
    filler.unlink()
    assert run(root, "verify", "--strict").exit_code == 0
    again = run(root, "import", str(source), "--agent", "uitars")
    assert again.exit_code == 0, again.output
    imported = run(
        root,
        "sql",
        "--format",
        "csv",
        "select count(*) as n from sessions where run_id = 'import-src'",
    )
    assert imported.output == "n\n1\n"
    assert run(root, "verify", "--strict").exit_code == 0


def test_rebuilding_the_index_on_a_full_disk_is_one_line_and_leaves_nothing(
    full_disk: tuple[Path, Path],
) -> None:
    root, filler = full_disk
    (root / "index.duckdb").unlink()  # free the old index's space: the rebuild needs it back
    fill(filler)
    assert_one_line_error(
        run(root, "index", "--rebuild"), f"the disk holding {root}/index.duckdb {_FULL}"
    )
    assert _leftovers(root) == []
    assert sorted(p.name for p in root.iterdir()) == ["blobs", "index.lock", "journal"]
    filler.unlink()
    rebuilt = run(root, "index", "--rebuild")
    assert rebuilt.output == "index rebuilt: 5 new events from 1 streams\n"


def test_a_query_on_a_full_disk_still_answers_and_leaves_no_manifest_temp(
    full_disk: tuple[Path, Path],
) -> None:
    root, filler = full_disk
    (root / "index.manifest").unlink()  # the cache is gone: the query must ask the database
    fill(filler)
    result = run(root, "sql", "--format", "csv", "select session_id from sessions")
    assert (result.exit_code, result.output) == (0, "session_id\na\n")
    assert _leftovers(root) == []


def test_a_blob_on_a_full_disk_raises_one_line_and_leaves_no_temp_file(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs") as mount:
        store = open_store(mount / "store", fsync=True)
        fill(mount / "filler")
        with pytest.raises(StoreNotWritable) as raised:
            store.put_blob(_noise_png(7))
        shard = next((store.root / "blobs").iterdir())
        assert str(raised.value) == f"the disk holding {shard} {_FULL}"
        assert _leftovers(store.root) == []
        (mount / "filler").unlink()
        sha = store.put_blob(_noise_png(7))
        assert store.get_blob(sha) == _noise_png(7)


# --- chmod -R a-w, for a user who is not root (root is not stopped by modes) -----------------


@pytest.fixture
def chmodded(tmp_path: Path) -> Iterator[Path]:
    """A store with an up-to-date index, ``chmod -R a-w``, in a folder others may enter."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run ownloop as nobody")
    folder = Path(tempfile.mkdtemp(prefix="ownloop-ro-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        root = _make_store(folder / "store")
        assert run(root, "index").exit_code == 0
        _harness_folder(folder / "src", screens=1)
        subprocess.run(["chmod", "-R", "a-w", str(root)], check=True)
        yield root
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(folder)], check=True)
        shutil.rmtree(folder)


def _as_nobody(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    ownloop = Path(sys.executable).with_name("ownloop")
    return subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            str(ownloop),
            "--store",
            str(root),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_a_chmodded_store_reads_and_refuses_writes_in_one_line(chmodded: Path) -> None:
    probe = _as_nobody(chmodded, "verify")
    if "verify:" not in probe.stdout:  # e.g. the checkout is not readable by others
        pytest.skip(f"nobody cannot run this checkout's ownloop: {probe.stderr[-200:]}")
    assert probe.returncode == 0, probe.stderr
    sessions = _as_nobody(chmodded, "sql", "--format", "csv", "select session_id from sessions")
    assert (sessions.returncode, sessions.stdout) == (0, "session_id\na\n"), sessions.stderr
    rebuild = _as_nobody(chmodded, "index", "--rebuild")
    assert (rebuild.returncode, rebuild.stdout, rebuild.stderr) == (
        1,
        "",
        f"Error: the store {chmodded} is read-only and its index cannot be rebuilt there: "
        f"run `ownloop --store {chmodded} index` where the store is writable, or copy it to a "
        "writable folder and pass --store DIR\n",
    )
    for args in (
        ("import", str(chmodded.parent / "src"), "--agent", "uitars"),
        ("regrade", "--run", "r1", "--grader", "answer:exact:42"),
    ):
        refused = _as_nobody(chmodded, *args)
        assert refused.returncode == 1 and refused.stdout == "", refused.stderr
        assert len(refused.stderr.splitlines()) == 1, refused.stderr
        assert refused.stderr.startswith("Error: ") and str(chmodded) in refused.stderr


# --- the messages themselves -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (
            errno.EROFS,
            "/s/x is on a read-only file system. Remount it read-write, or pass --store DIR "
            "with a writable folder",
        ),
        (
            errno.EACCES,
            "permission denied: /s/x. Give your user write access to it (chmod/chown), or "
            "pass --store DIR with a writable folder",
        ),
        (errno.ENOSPC, f"the disk holding /s/x {_FULL}"),
        (
            errno.EDQUOT,
            "the disk holding /s/x is over its quota. Free some space, then run the same "
            "command again (what is already recorded is kept)",
        ),
        (
            errno.ENOTDIR,
            "/s/x cannot be a folder: a part of it is a file. Pass --store DIR naming a folder",
        ),
    ],
)
def test_disk_errors_say_what_and_where_and_the_fix(code: int, expected: str) -> None:
    error = disk_error(OSError(code, os.strerror(code), "/s/x"))
    assert error is not None and (str(error), error.errno) == (expected, code)


def test_other_os_errors_are_left_alone() -> None:
    assert disk_error(OSError(errno.ECONNREFUSED, "refused")) is None
    assert disk_error(OSError(errno.EACCES, "denied")) is None  # no path: e.g. binding a port
    assert str(disk_error(OSError(errno.ENOSPC, "full"))) == f"the disk holding the store {_FULL}"
