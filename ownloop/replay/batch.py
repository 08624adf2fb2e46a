"""Re-execute every recorded session of a run on a few browsers reused across sessions.

``ownloop replay --run R --execute ops|actions|responses [--workers N]``: the run's recorded
sessions (not replays of another session, not imported ones; ``--where`` narrows them) are
re-executed by ``N`` worker threads, each with one Chromium of its own that serves session after
session, a fresh browser context each (launching Chromium costs about a second; a context and
its first page 0.2-0.5 s). Each child is planned, run and recorded exactly as a single ``replay
TARGET --execute`` records it (:mod:`ownloop.replay.execute`): same events, same run.

A session that fails (its browser crashed, its task could not be set up) is reported in its row
and the batch goes on; a worker whose browser died launches another before its next session.
Ctrl-C stops the sessions in flight (they end ``interrupted``) and starts no other: the children
already finished stay recorded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from ownloop.errors import OwnloopError
from ownloop.recorder.episode import EpisodeResult
from ownloop.replay.execute import MODES, Plan, ReplayError, plan_replay, run_planned
from ownloop.replay.fold import Session
from ownloop.replay.options import ReplayOptions
from ownloop.replay.progress import StepProgress
from ownloop.replay.reopen import shared_servers
from ownloop.replay.runs import child_run, end_run, ensure_run, recorded_settings
from ownloop.replay.selection import Selection, fold_selected
from ownloop.replay.summary import steps_identical
from ownloop.replay.target import NotReplayable, check_replayable
from ownloop.store import Store
from ownloop.store.queries import has_run_started
from ownloop.store.query import QueryResult
from ownloop.world.chromium import Launched, open_browser

__all__ = [
    "BatchRow",
    "Batched",
    "batch_document",
    "batch_rows",
    "batch_sessions",
    "batch_totals",
    "execute_batch",
    "replay_run",
]


_DEFAULTS = ReplayOptions()


class BatchRow(NamedTuple):
    """One parent of the batch: its child (None when none was recorded), the number of the
    browser it ran in (1, 2, ... in launch order; 0 for none) and why it failed, if it did."""

    parent: Session
    child: Session | None
    browser: int
    error: str | None = None

    @property
    def reproduced(self) -> bool | None:
        """Whether the child's grade is the parent's (same score, same verdict); None when
        either is ungraded."""
        if self.child is None:
            return False
        theirs, ours = self.parent.latest_grade, self.child.latest_grade
        if theirs is None or ours is None:
            return None
        return theirs.score == ours.score and theirs.passed == ours.passed


class Batched(NamedTuple):
    """A finished batch: a row per parent in the run's order, and how it went."""

    run_id: str
    mode: str
    rows: list[BatchRow]
    workers: int
    browsers: int  # Chromium launches, a replaced (crashed) browser included
    seconds: float
    interrupted: bool


def batch_sessions(store: Store, run_id: str, where: str | None = None) -> list[Session]:
    """The recorded sessions of ``run_id`` a batch re-executes, oldest first: not replays of
    another session, not imported; ``where`` is a SQL condition over the ``sessions`` view.

    Raises:
        ReplayError: the run is unknown, or has no such session (one line, with the fix).
    """
    if not has_run_started(store, run_id):
        raise ReplayError(
            f"no run '{run_id}' in {store.root}. List runs with: "
            'ownloop sql "select run_id, sessions from runs"'
        )
    sessions = [
        session
        for session in fold_selected(store, Selection(run_id=run_id, where=where)).values()
        if session.parent_session_id is None
        and session.task is not None
        and not session.task.suite.startswith("import:")
    ]
    if not sessions:
        narrowed = f" matching {where!r}" if where else ""
        raise ReplayError(
            f"run '{run_id}' has no recorded session{narrowed} to re-execute (replays and "
            f"imported sessions are not). List them with: ownloop sessions --run {run_id}"
        )
    return sorted(sessions, key=lambda s: (s.started_at is None, s.started_at, s.session_id))


class _Work:
    """The batch's shared state: the next parent to take, the rows, the launch count."""

    def __init__(self, store: Store, chromium: str | None) -> None:
        self.store, self.chromium = store, chromium
        # Filled in while the workers launch their browsers; ``planned`` says it is.
        self.plans: list[tuple[Session, Plan | str]] = []
        self.planned = threading.Event()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.taken = 0
        self.browsers = 0
        self.rows: dict[int, BatchRow] = {}
        self.results: list[EpisodeResult] = []
        self.fatal: list[BaseException] = []
        self.on_row: Callable[[BatchRow], None] | None = None

    def next(self) -> int | None:
        with self.lock:
            if self.stop.is_set() or self.taken >= len(self.plans):
                return None
            self.taken += 1
            return self.taken - 1

    def finish(self, index: int, row: BatchRow, result: EpisodeResult | None) -> None:
        with self.lock:
            self.rows[index] = row
            if result is not None:
                self.results.append(result)
        if self.on_row is not None:
            self.on_row(row)

    def browser(self, worker: _Worker, *, failed: bool) -> None:
        """Keep the worker's Chromium while it lives, else launch another and number it.

        After a failed session (``failed``) the browser is also asked to open a context: a
        Chromium that died with the session may not yet be known to be disconnected."""
        launched = worker.launched
        if (
            launched is not None
            and launched.browser.is_connected()
            and (not failed or _answers(launched))
        ):
            return
        worker.close()
        launched = open_browser(self.chromium)
        with self.lock:
            self.browsers += 1
            worker.number = self.browsers
        worker.launched = launched

    def run(self) -> None:
        """One worker: session after session in its own Chromium, until none is left. The
        browser is launched at once, while the caller still plans the sessions."""
        worker = _Worker()
        failed = False
        try:
            self.browser(worker, failed=False)
            self.planned.wait()
            while (index := self.next()) is not None:
                parent, plan = self.plans[index]
                if isinstance(plan, str):  # it cannot be re-executed so: said in its row
                    self.finish(index, BatchRow(parent, None, 0, plan), None)
                    continue
                self.browser(worker, failed=failed)
                assert worker.launched is not None
                number = worker.number
                try:
                    result = run_planned(
                        worker.launched.browser, self.store, parent, plan, self.stop
                    )
                except Exception as exc:  # noqa: BLE001 - one failed session; the batch goes on
                    error = str(exc) if isinstance(exc, OwnloopError) else _short(exc)
                    self.finish(index, BatchRow(parent, None, number, error), None)
                    failed = True
                    continue
                failed = result.error is not None
                self.finish(index, BatchRow(parent, None, number, result.error), result)
        except BaseException as exc:  # noqa: BLE001 - no browser starts: re-raised by the caller
            self.fatal.append(exc)
            self.stop.set()
        finally:
            worker.close()


class _Worker:
    """A worker's Chromium (None before the first session) and its launch number."""

    def __init__(self) -> None:
        self.launched: Launched | None = None
        self.number = 0

    def close(self) -> None:
        """Close the browser (one that died is gone already)."""
        launched, self.launched = self.launched, None
        if launched is not None:
            _close(launched)


def _short(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"


def _answers(launched: Launched) -> bool:
    """Whether the browser opens (and closes) a context."""
    try:
        launched.browser.new_context().close()
    except Exception:  # noqa: BLE001 - any failure means: launch another
        return False
    return True


def _close(launched: Launched) -> None:
    try:
        launched.close()
    except Exception:  # noqa: BLE001, S110 - a driver that died with its browser is gone already
        pass


def execute_batch(
    store: Store,
    parents: list[Session],
    mode: str,
    options: ReplayOptions = _DEFAULTS,
    *,
    workers: int = 2,
    on_row: Callable[[BatchRow], None] | None = None,
) -> Batched:
    """Re-execute ``parents`` on ``workers`` browsers reused across sessions (module docstring).

    Args:
        store: the store holding the parents; the children are written to it.
        parents: the sessions to re-execute (e.g. ``batch_sessions``), all of one run.
        mode: ``ops``, ``actions`` or ``responses``.
        options: how each is re-executed, as a single replay is (``ReplayOptions``).
        workers: sessions at once, each worker with a Chromium of its own.
        on_row: told each parent's row as it finishes (its child not folded yet).

    Raises:
        ReplayError: an unknown mode, or options that fit no session.
        ChromiumNotFound: no browser can start.
    """
    if mode not in MODES:
        raise ReplayError(f"unknown replay mode {mode!r}. Use one of: {', '.join(MODES)}")
    if workers < 1:
        raise ReplayError("--workers must be at least 1")
    began = time.monotonic()
    work = _Work(store, options.chromium)
    work.on_row = on_row
    # Launching a Chromium takes about a second: the workers start theirs while this thread
    # plans (a worker left without a session closes its browser again).
    threads = [
        threading.Thread(target=work.run, name=f"ownloop-replay-{n + 1}", daemon=True)
        for n in range(min(workers, len(parents)))
    ]
    interrupted = False
    run_id, new_run = "", False
    with shared_servers():  # one MiniWoB server for all, on the recorded port
        for thread in threads:
            thread.start()
        try:
            try:
                work.plans = plans = _plans(store, parents, mode, options)
                planned = [(parent, plan) for parent, plan in plans if not isinstance(plan, str)]
                if not planned:  # nothing can be re-executed so: the first reason says why
                    raise ReplayError(str(plans[0][1]) if plans else "no session to re-execute")
                parent, plan = planned[0]
                assert parent.task is not None
                new_run = ensure_run(
                    store, plan.run_id, plan.agent, plan.model, options.endpoint, parent.task.suite
                )
                run_id = plan.run_id
            except BaseException:
                work.stop.set()
                raise
            finally:
                work.planned.set()
                if work.stop.is_set():
                    for thread in threads:
                        thread.join(60)
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
        except KeyboardInterrupt:
            interrupted = True
            work.stop.set()
            for thread in threads:
                thread.join(60)
            if not run_id:
                raise
    if work.fatal and not work.results:
        raise work.fatal[0]
    why = "not run: " + (_short(work.fatal[0]) if work.fatal else "interrupted")
    for index, (parent, _plan) in enumerate(work.plans):
        work.rows.setdefault(index, BatchRow(parent, None, 0, why))
    if new_run:
        end_run(store, run_id, work.results)
    store.sync()
    return Batched(
        run_id,
        mode,
        _with_children(store, work),
        len(threads),
        work.browsers,
        time.monotonic() - began,
        interrupted,
    )


def _plans(
    store: Store, parents: list[Session], mode: str, options: ReplayOptions
) -> list[tuple[Session, Plan | str]]:
    """Each parent's plan, or why it cannot be re-executed so."""
    settings = recorded_settings(store, parents)  # one query for all, as one run for all
    runs: dict[str, str] = {}
    plans: list[tuple[Session, Plan | str]] = []
    for parent in parents:
        try:
            check_replayable(parent, mode)
            run_id = options.run_id or parent.run_id
            if run_id not in runs:
                runs[run_id] = child_run(store, run_id)
            plan = plan_replay(
                store,
                parent,
                mode,
                options,
                recorded=settings.get(parent.session_id, {}),
                into_run=runs[run_id],
            )
            plans.append((parent, plan))
        except (NotReplayable, ReplayError) as exc:
            plans.append((parent, str(exc)))
    return plans


def _with_children(store: Store, work: _Work) -> list[BatchRow]:
    """The rows in the parents' order, each child folded (all in one read of the index)."""
    ids = tuple(result.session_id for result in work.results)
    children = fold_selected(store, Selection(session_ids=ids)).values() if ids else ()
    by_parent = {child.parent_session_id: child for child in children}
    return [
        row._replace(child=by_parent.get(row.parent.session_id))
        for _index, row in sorted(work.rows.items())
    ]


# ---------------------------------------------------------------- the summary

_COLUMNS = (
    ("parent_session_id", "VARCHAR"),
    ("task_id", "VARCHAR"),
    ("child_session_id", "VARCHAR"),
    ("browser", "INTEGER"),
    ("parent_reward", "DOUBLE"),
    ("child_reward", "DOUBLE"),
    ("reproduced", "BOOLEAN"),
    ("steps_identical", "INTEGER"),
    ("steps_compared", "INTEGER"),
    ("status", "VARCHAR"),
    ("error", "VARCHAR"),
)


def _score(session: Session | None) -> float | None:
    grade = session.latest_grade if session is not None else None
    return grade.score if grade is not None else None


def batch_rows(batched: Batched) -> QueryResult:
    """A row per parent: its child, browser, both rewards, whether the child reproduced the
    parent's, its steps identical out of compared, its status and error."""
    rows = []
    for row in batched.rows:
        child = row.child
        same = steps_identical(row.parent, child) if child is not None else None
        rows.append(
            (
                row.parent.session_id,
                row.parent.task_id,
                child.session_id if child is not None else None,
                row.browser or None,
                _score(row.parent),
                _score(child),
                row.reproduced,
                same.same if same is not None else None,
                same.compared if same is not None else None,
                child.status if child is not None else "not recorded",
                row.error,
            )
        )
    return QueryResult([name for name, _ in _COLUMNS], [kind for _, kind in _COLUMNS], rows)


class _Totals(NamedTuple):
    sessions: int
    reproduced: int
    not_reproduced: int
    ungraded: int
    failed: int  # no child recorded


def _totals(batched: Batched) -> _Totals:
    rows = batched.rows
    failed = sum(1 for row in rows if row.child is None)
    return _Totals(
        len(rows),
        sum(1 for row in rows if row.reproduced is True),
        sum(1 for row in rows if row.reproduced is False) - failed,
        sum(1 for row in rows if row.reproduced is None),
        failed,
    )


def batch_totals(batched: Batched) -> str:
    """The batch in one line: rewards reproduced, not, failed sessions, browsers, time."""
    totals = _totals(batched)
    line = (
        f"replay --execute {batched.mode} of run {batched.run_id}: {totals.sessions} sessions, "
        f"{totals.reproduced} rewards reproduced, {totals.not_reproduced} not, "
        f"{totals.ungraded} ungraded, {totals.failed} failed; {batched.browsers} browser"
        f"{'s' if batched.browsers != 1 else ''} launched for {batched.workers} worker"
        f"{'s' if batched.workers != 1 else ''}, {batched.seconds:.1f}s"
    )
    return line + (" (interrupted)" if batched.interrupted else "")


def batch_document(batched: Batched) -> str:
    """The batch as one JSON document: its totals and a row per parent."""
    table = batch_rows(batched)
    return msgspec.json.encode(
        {
            "run_id": batched.run_id,
            "mode": batched.mode,
            "workers": batched.workers,
            "browsers": batched.browsers,
            "seconds": round(batched.seconds, 3),
            "interrupted": batched.interrupted,
            **_totals(batched)._asdict(),
            "rows": [dict(zip(table.columns, row, strict=True)) for row in table.rows],
        }
    ).decode()


def replay_run(
    store: Store,
    run_id: str,
    execute: str,
    options: ReplayOptions,
    *,
    workers: int = 2,
    where: str | None = None,
) -> Batched:
    """``ownloop replay --run R --execute MODE [--workers N] [--where SQL]``, with progress on
    stderr (a line per finished session).

    Raises:
        ReplayError: an unknown run, no session to re-execute, or options a batch cannot take.
    """
    if options.fork_at is not None:
        raise ReplayError("--fork-at forks one session: give a TARGET (a session or task id)")
    parents = batch_sessions(store, run_id, where)
    with StepProgress(f"replay run {run_id}", "session", len(parents)) as progress:
        done: list[BatchRow] = []

        def on_row(row: BatchRow) -> None:
            done.append(row)
            progress.advance(len(done), f"{row.parent.task_id}: {row.error or 'recorded'}")

        return execute_batch(store, parents, execute, options, workers=workers, on_row=on_row)
