"""Claims: which recorder runs which task of a run, and which of a task's sessions counts.

Several recorders may work on one run at once (two terminals, or Ray actors on machines sharing
the store's file system). They coordinate through small files in the store, never through a
lock held open::

    claims/<sha(run)>/<sha(task:repeat)>.<generation>.claim     who runs the task (a lease)
    claims/<sha(run)>/<sha(task:repeat)>.<generation>.released  that claim was given back
    claims/<sha(run)>/<sha(task:repeat)>.done                   the task's counted session
    claims/<sha(run)>/<sha(session)>.crashed                    who marked a session crashed
    claims/<sha(run)>/contract.json                             the run's contract (admission)

File names come from hashes, never from run or task ids. Every file is created exclusively and
complete (written to a temporary name, fsync'd, then hard-linked to its name: the link fails if
the name exists), so two claimants can never both create one, and a reader never sees half of one.

A task's claims are numbered: the claim that counts is the one with the highest generation
(found by probing 1, 2, 3 ... by name, not by listing a directory, which may miss a file being
created). Claiming is creating the next generation: of all who saw generation g free (released)
or stale, exactly one creates g + 1. A claim is renewed (its mtime touched) by a background
thread while it is held; it is stale when its holder's process is known dead (same host, pid
gone or reused) or when it was not renewed for ``lease_s`` seconds (a dead machine, a hung
process). A stale claim may be taken over: the new claim records whom it took over.

When a session ends with a final outcome, ``finish`` creates the ``.done`` marker: **the first
scored session wins**, every later one learns the winner and is kept but not counted. An unscored
end (error, endpoint_error, interrupted, crashed) gives the claim back with ``release`` so a retry
may take it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import NamedTuple

from ownloop.errors import OwnloopError

__all__ = [
    "CLAIM_MARGIN_S",
    "Claim",
    "Claims",
    "Counting",
    "claims_dir",
    "holder_alive",
    "lease_seconds",
    "stale_temporaries",
    "this_holder",
]

CLAIM_MARGIN_S = 60.0
"""A claim is stale after the task's timeout plus this margin without renewal."""


class ClaimError(OwnloopError):
    """The claims folder cannot be written."""


class Claim(NamedTuple):
    """A claim this process holds on one repeat of a task."""

    task_id: str
    repeat: int
    generation: int
    holder: str
    session_id: str
    attempt: int
    took_over: str | None  # the stale claim's holder, when this claim took one over
    path: Path
    took_over_session: str | None = None  # the session the stale claim was for


class Counting(NamedTuple):
    """Whether a scored session counts for its task, and which session does."""

    counted: bool
    winner: str


def lease_seconds(timeout_s: float) -> float:
    """How long a claim lives without renewal: ``$OWNLOOP_CLAIM_LEASE`` or the task timeout plus
    ``CLAIM_MARGIN_S``."""
    text = os.environ.get("OWNLOOP_CLAIM_LEASE", "")
    try:
        value = float(text) if text else 0.0
    except ValueError:
        value = 0.0
    return value if value > 0 else timeout_s + CLAIM_MARGIN_S


def _process_start(pid: int) -> str | None:
    """The start time (clock ticks since boot) of a process, from /proc; None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def this_holder() -> str:
    """This process as a claimant: ``host:pid:start`` (start tells a reused pid apart)."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_process_start(pid) or '?'}"


def holder_alive(holder: str) -> bool | None:
    """Whether a claimant's process runs: True, False, or None when it cannot be told (another
    host, no /proc)."""
    host, _, rest = holder.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit() or not Path("/proc/self").exists():
        return None
    now_start = _process_start(int(pid_text))
    if now_start is None:
        return False
    return start in ("", "?") or now_start == start


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def claims_dir(store_root: Path, run_id: str) -> Path:
    """The folder of a run's claims."""
    return store_root / "claims" / _sha(run_id)


_TEMPORARY_S = CLAIM_MARGIN_S  # a claim's temporary file lives for milliseconds: older is stale


def stale_temporaries(store_root: Path, run_id: str | None = None) -> list[Path]:
    """The temporary files (``.<name>.<pid>.<thread>.tmp``) that a claimant killed between
    writing and linking one left in the claims of ``run_id`` (of every run: None), older than a
    minute. Age, not a pid, tells them: a claimant on another machine has pids of its own."""
    folders = [claims_dir(store_root, run_id)] if run_id is not None else []
    if run_id is None:
        try:
            folders = sorted(p for p in (store_root / "claims").iterdir() if p.is_dir())
        except OSError:
            return []
    cutoff = time.time() - _TEMPORARY_S
    found: list[Path] = []
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                try:
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        found.append(Path(entry.path))
                except OSError:
                    continue
    return sorted(found)


def _create(path: Path, data: bytes) -> bool:
    """Create ``path`` holding ``data`` if no file has that name: True if this call created it."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temp, path)
        created = True
    except FileExistsError:
        created = False
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        created = _create_without_link(path, data)  # a file system without hard links
    finally:
        temp.unlink(missing_ok=True)
    if created:
        _sync_dir(path.parent)
    return created


def _create_without_link(path: Path, data: bytes) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _sync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _read(path: Path) -> dict[str, object] | None:
    """A claim file's JSON (an empty dict if unreadable), None if there is no such file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _json(**fields: object) -> bytes:
    return json.dumps(fields, sort_keys=True).encode() + b"\n"


class Claims:
    """The claims of one run in one store, as seen by one process.

    Args:
        store_root: the store directory.
        run_id: the run.
        lease_s: seconds without renewal after which a claim is stale (``lease_seconds``).
        holder: this claimant's name (default ``this_holder()``).
    """

    def __init__(
        self, store_root: Path, run_id: str, *, lease_s: float, holder: str | None = None
    ) -> None:
        self.dir = claims_dir(store_root, run_id)
        self.run_id = run_id
        self.lease_s = lease_s
        self.holder = holder or this_holder()
        self._held: dict[Path, Claim] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ClaimError(
                f"cannot write claims in {self.dir}: {error.strerror}. Check the store's "
                "permissions and free space"
            ) from None
        for stale in stale_temporaries(store_root, run_id):  # a kill -9 mid-write left them
            try:
                stale.unlink()
            except OSError:
                pass

    # ------------------------------------------------------------------ names
    def _key(self, task_id: str, repeat: int) -> str:
        return _sha(f"{task_id}:{repeat}")

    def _claim_path(self, key: str, generation: int) -> Path:
        return self.dir / f"{key}.{generation}.claim"

    def _latest(self, key: str) -> tuple[int, Path | None]:
        generation = 0
        while self._claim_path(key, generation + 1).exists():
            generation += 1
        return generation, self._claim_path(key, generation) if generation else None

    # ------------------------------------------------------------------ questions
    def winner(self, task_id: str, repeat: int = 1) -> str | None:
        """The session that counts for the task, once one scored; else None."""
        done = _read(self.dir / f"{self._key(task_id, repeat)}.done")
        if done is None:
            return None
        return str(done.get("session", ""))

    def in_flight(self, task_id: str, repeat: int = 1) -> str | None:
        """The session of the task's live claim (held, renewed, holder running), if any."""
        generation, path = self._latest(self._key(task_id, repeat))
        if path is None or self._is_free(path):
            return None
        info = _read(path) or {}
        return str(info.get("session", "")) or None

    def _is_free(self, path: Path) -> bool:
        """Whether a claim was released or is stale (so it may be taken)."""
        if path.with_suffix(".released").exists():
            return True
        return self._stale(path)

    def _stale(self, path: Path) -> bool:
        try:
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return True
        info = _read(path) or {}
        return holder_alive(str(info.get("holder", ""))) is False or age > self.lease_s

    # ------------------------------------------------------------------ claiming
    def claim(
        self, task_id: str, repeat: int, session_id: str, *, attempt: int = 1
    ) -> Claim | None:
        """Claim one repeat of a task for ``session_id``, or None: it is done or held.

        ``attempt`` is the least attempt number to give the session; a task claimed before gets
        at least the attempt after its last claim's.
        """
        key = self._key(task_id, repeat)
        done = self.dir / f"{key}.done"
        for _ in range(100):  # each lost race means another claimant moved: look again
            if done.exists():
                return None
            generation, path = self._latest(key)
            took_over: str | None = None
            took_over_session: str | None = None
            if path is not None:
                info = _read(path) or {}
                released = path.with_suffix(".released").exists()
                if not released:
                    if not self._stale(path):
                        return None
                    took_over = str(info.get("holder", "")) or "unknown"
                    took_over_session = str(info.get("session", "")) or None
                last = info.get("attempt")
                if isinstance(last, int):
                    attempt = max(attempt, last + 1)
            new_path = self._claim_path(key, generation + 1)
            data = _json(
                holder=self.holder,
                session=session_id,
                task_id=task_id,
                repeat=repeat,
                attempt=attempt,
                took_over=took_over,
                at=time.time(),
            )
            if not _create(new_path, data):
                continue
            claim = Claim(
                task_id,
                repeat,
                generation + 1,
                self.holder,
                session_id,
                attempt,
                took_over,
                new_path,
                took_over_session,
            )
            if done.exists():  # it was finished while we looked
                self._give_back(claim)
                return None
            with self._lock:
                self._held[new_path] = claim
            self._start_renewer()
            return claim
        return None

    def release(self, claim: Claim) -> None:
        """Give the claim back (an unscored end): a retry may take the task."""
        with self._lock:
            self._held.pop(claim.path, None)
        self._give_back(claim)

    def _give_back(self, claim: Claim) -> None:
        _create(claim.path.with_suffix(".released"), _json(holder=self.holder, at=time.time()))

    def finish(self, task_id: str, repeat: int, session_id: str) -> Counting:
        """Record that ``session_id`` ended scored: the first scored session of the task wins.

        Releases this process's claim on the task, if it holds one.
        """
        key = self._key(task_id, repeat)
        done = self.dir / f"{key}.done"
        _create(
            done,
            _json(
                session=session_id,
                holder=self.holder,
                task_id=task_id,
                repeat=repeat,
                at=time.time(),
            ),
        )
        winner = self.winner(task_id, repeat) or ""
        with self._lock:
            mine = [c for c in self._held.values() if (c.task_id, c.repeat) == (task_id, repeat)]
        for claim in mine:
            self.release(claim)
        return Counting(winner == session_id, winner)

    def mark_crashed(self, session_id: str) -> bool:
        """Whether this caller is the one to record ``session_id`` as crashed (exactly one is)."""
        return _create(
            self.dir / f"{_sha(session_id)}.crashed", _json(holder=self.holder, at=time.time())
        )

    def admit(self, contract: bytes) -> bytes:
        """The run's contract: ``contract`` if this call is the first to declare one, else the
        one declared first (compare them to refuse a different contract)."""
        path = self.dir / "contract.json"
        if _create(path, contract):
            return contract
        return path.read_bytes()

    # ------------------------------------------------------------------ the lease
    def _start_renewer(self) -> None:
        with self._lock:
            if self._renewer is not None and self._renewer.is_alive():
                return
            self._stop.clear()
            self._renewer = threading.Thread(target=self._renew, name="ownloop-claims", daemon=True)
            self._renewer.start()

    def _renew(self) -> None:
        # A quarter of the lease leaves three renewals of slack before a live claim looks stale.
        every = min(max(self.lease_s / 4, 0.05), 30.0)
        while not self._stop.wait(every):
            with self._lock:
                paths = list(self._held)
            for path in paths:
                try:
                    os.utime(path)
                except OSError:
                    pass  # taken over and cleaned, or the store went away: nothing to renew

    def held(self) -> list[Claim]:
        """The claims this process holds."""
        with self._lock:
            return list(self._held.values())

    def close(self) -> None:
        """Release every claim still held and stop renewing."""
        for claim in self.held():
            self.release(claim)
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(5)
