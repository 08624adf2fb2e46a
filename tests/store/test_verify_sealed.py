"""The tamper matrix on a sealed run with a warm ``verify.state``: each tampering made after a
clean ``verify --run`` wrote its state, then each form of ``verify`` asked what it finds; the
docs' table of what each form finds is this matrix (checked row by row).

The two in-place edits the red team made (a flipped byte in a blob, ``score 1.0 -> 0.0`` in a
stream at the same size, each with its mtime put back) run through the real command too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ownloop.store import Store, open_store
from ownloop.store.seal import seal_run
from tests.store.test_seal import _TAMPERING, write_run
from tests.store.test_verify_incremental import age

_OWNLOOP = str(Path(sys.executable).with_name("ownloop"))
_DOCS = Path(__file__).resolve().parents[2] / "docs"
# Each form with the verify.state the clean check wrote, then without it (the tamperer deleted
# it too: without one, ``verify`` reads everything, as ``--full`` does).
_FORMS = (
    ("verify", True),
    ("verify --full", True),
    ("verify --run R --fingerprint SHA", True),
    ("verify", False),
    ("verify --run R --fingerprint SHA", False),
)


def _in_place(path: Path, old: bytes, new: bytes) -> None:
    """Overwrite ``old`` by ``new`` (same length) in the file itself, then put its mtime back."""
    stat = path.stat()
    data = path.read_bytes()
    at = data.index(old) if old else len(data) // 2
    replacement = new if old else bytes([data[at] ^ 1])
    with open(path, "r+b") as file:  # the same inode, the same size
        file.seek(at)
        file.write(replacement)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _blob_in_place(store: Store) -> None:
    _in_place(store.blobs.path(next(iter(store.blobs))), b"", b"")


def _score_in_place(store: Store) -> None:
    _in_place(store.journal_dir / "r1-t2.jsonl", b'"score":1.0', b'"score":0.0')


# The rows of the docs' table, by their first cell.
_ROWS: dict[str, Callable[[Store], None]] = {
    "a changed byte in any line": _TAMPERING["flip a byte"],
    "a stream's first line deleted": _TAMPERING["delete the first line"],
    "a stream's middle line deleted": _TAMPERING["delete a middle line"],
    "a stream's last line deleted": _TAMPERING["delete the last line"],
    "a stream truncated at a line boundary": _TAMPERING["truncate at a line boundary"],
    "a stream emptied": _TAMPERING["empty a stream"],
    "a stream deleted": _TAMPERING["delete a stream"],
    "two session streams swapped": _TAMPERING["swap two streams"],
    "the run's own stream deleted": _TAMPERING["delete the run stream"],
    "the run stream's last line deleted": _TAMPERING["delete the last line of the run stream"],
    "a blob deleted": _TAMPERING["delete a blob"],
    "a blob rewritten with a changed byte": _TAMPERING["corrupt a blob"],
    "a byte of a blob flipped in place, its mtime put back": _blob_in_place,
    "`score 1.0 -> 0.0` in a stream, same size, its mtime put back": _score_in_place,
    "a line edited and every sum after it recomputed (a re-chain)": _TAMPERING["re-chain an edit"],
    "the run stream re-chained": _TAMPERING["re-chain the run stream"],
    "the seal deleted": _TAMPERING["delete the seal"],
    "a re-chain of everything plus a freshly made seal": lambda store: _forge(store),
}


def _forge(store: Store) -> None:
    """The forger of ``test_seal`` (who re-seals a re-chained edit), starting without the
    verify.state that would tell the streams were rewritten."""
    (store.root / "verify.state").unlink()
    _TAMPERING["re-chain an edit and re-seal it"](store)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A sealed run (sealed once: the seal builds the index), and its fingerprint."""
    root = tmp_path_factory.mktemp("sealed") / "store"
    store = open_store(root, fsync=False)
    write_run(store)
    seal = seal_run(store, "r1").seal
    assert seal is not None
    return root, seal.fingerprint


def _warm(template: tuple[Path, str], root: Path) -> tuple[Store, str, bytes]:
    """A copy of the sealed run, dated a minute back, after a clean ``verify --run``: the
    store, the fingerprint, and the ``verify.state`` that check wrote."""
    shutil.copytree(template[0], root)
    store = open_store(root, fsync=False)
    age(store)
    report = store.verify(run_id="r1", fingerprint=template[1], incremental=True)
    assert report.problems == []
    return store, template[1], (root / "verify.state").read_bytes()


def _docs_table() -> dict[str, tuple[str, ...]]:
    """The table under "What each `verify` form finds" in the docs, by row."""
    pages = [_DOCS / "store.md", _DOCS / "pending-security.md"]
    text = next(
        p.read_text() for p in pages if p.exists() and "What each `verify`" in p.read_text()
    )
    table = text[text.index("What each `verify` form finds") :]
    rows: dict[str, tuple[str, ...]] = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0] in ("tampering", "---") or set(cells[0]) <= {"-"}:
            continue
        rows[cells[0]] = tuple(cell.strip("*") for cell in cells[1:])
    return rows


def test_the_docs_table_lists_every_row() -> None:
    assert list(_docs_table()) == list(_ROWS)


@pytest.mark.parametrize("row", list(_ROWS))
@pytest.mark.slow
def test_what_each_verify_form_finds_on_a_warm_sealed_run(
    template: tuple[Path, str], tmp_path: Path, row: str
) -> None:
    store, fingerprint, state = _warm(template, tmp_path / "store")
    _ROWS[row](store)
    found = []
    for form, warm in _FORMS:
        path = tmp_path / "store" / "verify.state"
        if warm:
            path.write_bytes(state)  # as the clean check left it
        else:
            path.unlink(missing_ok=True)
        report = store.verify(
            run_id="r1" if "--run" in form else None,
            fingerprint=fingerprint if "--run" in form else None,
            incremental="--full" not in form,
        )
        kinds = "; ".join(sorted({p.kind for p in report.problems}))
        severity = "error" if report.errors else "warning" if report.warnings else "not found"
        found.append(f"{severity} ({kinds})" if kinds else severity)
    assert tuple(found) == _docs_table()[row]


@pytest.mark.parametrize("tamper", [_blob_in_place, _score_in_place])
@pytest.mark.slow
def test_in_place_edits_fail_the_sealed_run_audit(
    template: tuple[Path, str], tmp_path: Path, tamper: Callable[[Store], None]
) -> None:
    shutil.copytree(template[0], tmp_path / "store")
    store = open_store(tmp_path / "store", fsync=False)
    age(store)
    command = [_OWNLOOP, "--store", str(store.root), "verify", "--run", "r1"]
    command += ["--fingerprint", template[1][:16]]

    def verify() -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    clean = verify()
    assert (clean.returncode, clean.stdout.splitlines()[-1]) == (
        0,
        "verify: 5 streams, 48 events, 3 blobs: 0 errors, 0 warnings",
    )
    assert (store.root / "verify.state").exists()
    tamper(store)
    done = verify()
    assert done.returncode == 1, done.stdout
    assert done.stdout.splitlines()[-1].endswith("1 error, 0 warnings")
    [problem] = done.stdout.splitlines()[:-1]
    assert (
        "bad blob: bytes do not match the name (referenced by journal/r1-t" in problem
        if tamper is _blob_in_place
        else problem == "error: journal/r1-t2.jsonl:13: bad checksum: the line's bytes were changed"
    ), problem
