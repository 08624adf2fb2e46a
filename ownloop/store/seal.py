"""``ownloop seal``: audit a run, and only when the audit passes, close it with a fingerprint.

The audit (fail closed: any reason stops the seal):
- the run was admitted (it has a ``RunStarted``) and no recorder is running it;
- every task it declared, in every repeat, has exactly one counted session, and no session is
  without an end;
- its sessions ran under one step budget, the one it declared;
- every stream that holds its events passes ``verify`` (no damage) and every blob they refer
  to is present with the right bytes.

Then ``RunSealed`` is appended in a stream of its own. Its manifest lists every stream holding
the run's events (id, lines, last line's sum) and every session (task, repeat, status, counted,
score); the sha256 of the manifest is the run's fingerprint, to cite in a paper. From then on the
run takes no more events (``verify`` reports any as "appended after the seal"), and
``ownloop verify --run R`` checks the run against its seal: a removed, truncated, rewritten or
re-chained stream no longer matches the heads the manifest lists.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from ownloop.errors import OwnloopError
from ownloop.store.events import RunSealed, RunStarted, SealedSession, now
from ownloop.store.ledger import first_run_started, mixed_budgets
from ownloop.store.verify import seal_fingerprint, verify_store

if TYPE_CHECKING:
    from ownloop.store import Store

__all__ = [
    "RunIsSealed",
    "SealResult",
    "completeness_reasons",
    "flagged_task_lines",
    "refuse_if_sealed",
    "run_seals",
    "seal_run",
    "sealed_fingerprint",
]


class RunIsSealed(OwnloopError):
    """Something tried to add events to a sealed run."""


class SealResult(NamedTuple):
    """What ``seal_run`` did: the reasons it refused (empty when it sealed) and the seal."""

    run_id: str
    reasons: list[str]
    seal: RunSealed | None
    notes: tuple[str, ...] = ()  # tasks the audits flagged (they do not stop the seal)

    def lines(self) -> list[str]:
        if self.seal is None:
            return [
                *(f"refused: {reason}" for reason in self.reasons),
                *self.notes,
                f"run {self.run_id} was not sealed: {len(self.reasons)} reasons above",
            ]
        counted = sum(s.counted for s in self.seal.sessions)
        return [
            f"sealed run {self.run_id}: {len(self.seal.sessions)} sessions "
            f"({counted} counted), {len(self.seal.streams)} streams, "
            f"{self.seal.blobs} blobs, budget {self.seal.budget}",
            f"fingerprint {self.seal.fingerprint}",
            f"check it any time with: ownloop verify --run {self.run_id} "
            f"--fingerprint {self.seal.fingerprint[:16]}",
            *self.notes,
        ]


def sealed_fingerprint(store: Store, run_id: str) -> str | None:
    """The fingerprint of ``run_id``'s seal, or None when it is not sealed."""
    rows = store.sql(
        "select fingerprint from run_sealed where run_id = $run order by time limit 1",
        {"run": run_id},
    ).rows
    return str(rows[0][0]) if rows else None


def run_seals(store: Store) -> dict[str, str]:
    """Every sealed run's fingerprint, by run id."""
    rows = store.sql("select run_id, arg_min(fingerprint, time) from run_sealed group by 1").rows
    return {str(run): str(fingerprint) for run, fingerprint in rows}


def refuse_if_sealed(store: Store, run_id: str, what: str) -> None:
    """Raise ``RunIsSealed`` when ``run_id`` is sealed: ``what`` says what was refused."""
    fingerprint = sealed_fingerprint(store, run_id)
    if fingerprint is not None:
        raise RunIsSealed(
            f"run {run_id} is sealed ({fingerprint[:16]}) and takes no more events: {what}"
        )


def _streams_of(store: Store, run_id: str) -> list[str]:
    rows = store.sql(
        "select distinct stream from journal where run_id = $run order by 1", {"run": run_id}
    ).rows
    return [str(stream) for (stream,) in rows]


def _audit(store: Store, run_id: str) -> tuple[list[str], list[SealedSession], int | None]:
    """Every reason the run cannot be sealed, its sessions, and its budget."""
    reasons: list[str] = []
    started = first_run_started(store, run_id)
    assert started is not None  # seal_run checked
    open_run = store.sql(
        "select ended_at is null from runs where run_id = $run", {"run": run_id}
    ).rows
    if open_run and open_run[0][0]:
        reasons.append(
            "the run has no end after its last start: a recorder is running it, "
            "or was killed (resume it with the same ownloop record command)"
        )
    sessions = _sealed_sessions(store, run_id)
    reasons += _incomplete(started, sessions)
    mixed = mixed_budgets(store, run_id)
    if mixed:
        reasons.append(mixed)
    return reasons, sessions, started.max_steps


def _incomplete(started: RunStarted, sessions: list[SealedSession]) -> list[str]:
    """The completeness audit: every declared unit has one counted session, none is open."""
    reasons = [
        f"session {s.session_id} ({s.task_id}) has no end" for s in sessions if s.status is None
    ]
    units = {(t, r) for t in started.task_ids for r in range(1, started.repeats + 1)} or {
        (s.task_id, s.repeat) for s in sessions
    }
    counted = Counter((s.task_id, s.repeat) for s in sessions if s.counted)
    for task_id, repeat in sorted(units):
        n = counted[(task_id, repeat)]
        if n != 1:
            which = task_id if started.repeats <= 1 else f"{task_id} (repeat {repeat})"
            reasons.append(
                f"task {which} has {n} counted sessions, not 1"
                + (": resume the run to record it" if n == 0 else "")
            )
    for key in sorted(counted.keys() - units):
        reasons.append(f"task {key[0]} was counted but the run did not declare it")
    return reasons


def completeness_reasons(store: Store, run_id: str) -> list[str]:
    """Why ``seal`` would refuse ``run_id`` as incomplete (a declared task and repeat without
    exactly one counted session, a session without an end), without checking its streams;
    empty when it is complete. A run with no ``RunStarted`` cannot be audited: one reason."""
    started = first_run_started(store, run_id)
    if started is None:
        return [f"run {run_id} has no RunStarted: the seal cannot audit it"]
    return _incomplete(started, _sealed_sessions(store, run_id))


def _sealed_sessions(store: Store, run_id: str) -> list[SealedSession]:
    rows = store.sql(
        "select session_id, task_id, coalesce(repeat, 1), status, coalesce(counted, false), "
        "score, passed from sessions where run_id = $run and parent_session_id is null "
        "order by task_id, repeat, started_at, session_id",
        {"run": run_id},
    ).rows
    return [
        SealedSession(session_id=s, task_id=t, repeat=r, status=st, counted=c, score=sc, passed=p)
        for s, t, r, st, c, sc, p in rows
    ]


def seal_run(store: Store, run_id: str) -> SealResult:
    """Audit ``run_id``; when the audit passes, append ``RunSealed`` and return it."""
    if first_run_started(store, run_id) is None:
        raise OwnloopError(
            f"no run {run_id} in {store.root} (no RunStarted). List runs with: "
            'ownloop sql "select run_id from runs"'
        )
    fingerprint = sealed_fingerprint(store, run_id)
    if fingerprint is not None:
        raise RunIsSealed(
            f"run {run_id} is sealed already ({fingerprint[:16]}). Check it with: "
            f"ownloop verify --run {run_id}"
        )
    reasons, sessions, budget = _audit(store, run_id)
    streams = _streams_of(store, run_id)
    report = verify_store(store, streams=streams)
    reasons += [f"damage: {p.line()}" for p in report.problems if p.severity == "error"]
    heads = [report.heads[stream] for stream in streams if stream in report.heads]
    notes = tuple(flagged_task_lines(store, run_id))
    if reasons:
        return SealResult(run_id, reasons, None, notes)
    draft = RunSealed(
        at=now(),
        run_id=run_id,
        fingerprint="",
        streams=tuple(heads),
        sessions=tuple(sessions),
        blobs=report.blobs,
        budget=budget,
    )
    seal = msgspec.structs.replace(draft, fingerprint=seal_fingerprint(draft))
    with store.stream() as writer:
        writer.append([seal])
    store.sync()
    return SealResult(run_id, [], seal, notes)


def flagged_task_lines(store: Store, run_id: str) -> list[str]:
    """A line for each audit that flagged tasks of the run: those whose untouched start state
    passes (``passes_untouched``, ``audit noop``) and those a blind replay passes
    (``non_discriminative``, ``audit blind``); none when no task was flagged."""
    found = store.sql(
        "select 'pass with no action at all (audit noop)', task_id from passes_untouched "
        "where run_id = $run union all select 'a blind replay passes (audit blind)', task_id "
        "from non_discriminative where run_id = $run order by 1, 2",
        {"run": run_id},
    ).rows
    by_kind: dict[str, list[str]] = {}
    for kind, task in found:
        by_kind.setdefault(str(kind), []).append(str(task))
    return [f"tasks that {kind}: {', '.join(tasks)}" for kind, tasks in by_kind.items()]
