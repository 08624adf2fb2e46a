"""Admission: a run declares its contract before any browser starts, and is refused if it cannot
keep it.

``record`` validates everything it can first (the suite, every task's grader, the source tree when
``--require-clean``, the suite's hash when ``--expect-suite``), then compares the contract with
the one the run was started with (a resume, or a second recorder on the same run). Only then is
``RunStarted`` written; a refusal writes nothing. What the contract holds, and why versions are
left out of its hash, is said in :mod:`ownloop.store.ledger`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from ownloop.agents.base import Agent
from ownloop.agents.released import released_commit, released_sha256
from ownloop.errors import OwnloopError
from ownloop.grading import make_grader
from ownloop.recorder.model import public_endpoint
from ownloop.recorder.run_options import RecordOptions, redact_argv
from ownloop.store import Store
from ownloop.store.claims import Claims
from ownloop.store.events import RunStarted, Task, now
from ownloop.store.ledger import (
    config_sha256,
    contract_diff,
    contract_json,
    contract_of,
    first_run_started,
)
from ownloop.store.seal import refuse_if_sealed

__all__ = [
    "AdmissionRefused",
    "SourceState",
    "admit",
    "check_clean",
    "check_graders",
    "check_suite",
    "declare",
    "seal_contract",
    "source_state",
]


class AdmissionRefused(OwnloopError):
    """The run may not start: a dirty tree, another suite, or another contract."""


class SourceState(NamedTuple):
    """The ownloop checkout a run is recorded with: its commit, and whether it has changes."""

    path: str
    commit: str  # "" when not a git checkout
    dirty: bool | None  # None: not a git checkout (an installed package), or git is missing


def _git(path: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", "-C", str(path), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None


def source_state(path: str | os.PathLike[str] | None = None) -> SourceState:
    """The git state of ``path``: ``$OWNLOOP_SOURCE_DIR``, else the folder ownloop runs from.

    A package installed into a virtualenv that happens to sit inside some git repository is not
    that repository's checkout: the folder counts as a checkout only if git tracks its files.
    Dirty means ``git status --porcelain`` prints anything (untracked files not ignored too).
    """
    folder = Path(
        path or os.environ.get("OWNLOOP_SOURCE_DIR") or Path(__file__).resolve().parents[1]
    )
    tracked = _git(folder, "ls-files", "--error-unmatch", "--", ".")
    if tracked is None:
        # git is missing: a checkout (a .git above) cannot be told clean, anything else is not one
        inside = any((p / ".git").exists() for p in (folder, *folder.parents))
        return SourceState(str(folder), "", True if inside else None)
    if tracked.returncode != 0:
        return SourceState(str(folder), "", None)
    head = _git(folder, "rev-parse", "HEAD")
    status = _git(folder, "status", "--porcelain")
    commit = head.stdout.strip() if head is not None and head.returncode == 0 else ""
    if status is None or status.returncode != 0:
        return SourceState(str(folder), commit, True)  # cannot tell: not clean
    return SourceState(str(folder), commit, bool(status.stdout.strip()))


def check_clean(state: SourceState) -> None:
    """``--require-clean``: refuse a checkout with changes (an installed package passes).

    Raises:
        AdmissionRefused: the checkout has uncommitted changes, or git cannot tell.
    """
    if state.dirty:
        raise AdmissionRefused(
            f"the ownloop checkout at {state.path} has uncommitted changes (--require-clean): "
            "commit them (git status shows them) or leave out --require-clean"
        )


def check_suite(suite: Any, expected: str) -> None:
    """``--expect-suite SHA``: refuse a suite whose source hash is another.

    Raises:
        AdmissionRefused: the hashes differ.
    """
    actual = str(suite.tasks_sha256)
    if actual.lower() != expected.strip().lower():
        raise AdmissionRefused(
            f"the suite {suite.name} has sha256 {actual}, not {expected.strip()} "
            "(--expect-suite): its tasks changed. Check the tasks file or pass its new hash"
        )


def check_graders(tasks: list[Task], default_grader: str) -> None:
    """Every task's grader spec builds, so no run starts that could not grade.

    Raises:
        OwnloopError: the first task whose grader spec is wrong, and why.
    """
    specs: dict[str, str] = {}
    for task in tasks:
        spec = task.grader or default_grader
        if spec and spec != "none":
            specs.setdefault(spec, task.task_id)
    for spec, task_id in specs.items():
        try:
            make_grader(spec)
        except OwnloopError as error:
            raise AdmissionRefused(f"task {task_id}: {error}") from None


def seal_contract(started: RunStarted) -> RunStarted:
    """``started`` with its ``config_sha256`` filled in."""
    return msgspec.structs.replace(started, config_sha256=config_sha256(started))


def _refuse(run_id: str, before: dict[str, Any], after: dict[str, Any]) -> None:
    diff = contract_diff(before, after)
    if diff is not None:
        raise AdmissionRefused(
            f"run {run_id} was started with {diff[0]}, this command has {diff[1]}; use another "
            "--run or the same settings"
        )


def admit(store: Store, claims: Claims, started: RunStarted) -> None:
    """Refuse ``started`` if its run was started with another contract.

    The first ``RunStarted`` of the run in the store is the contract (a run recorded before
    contracts were declared has none and is not compared); the run's ``contract.json`` among its
    claims settles two recorders that start at the same moment.

    Raises:
        AdmissionRefused: one line naming each field that differs, before and now.
        RunIsSealed: the run is sealed: it takes no more sessions.
    """
    after = contract_of(started)
    first = None
    if store.has_streams():  # an empty store holds no seal and no run to compare with
        refuse_if_sealed(store, started.run_id, "record into another run with --run NAME")
        first = first_run_started(store, started.run_id)
    if first is not None and first.config_sha256:
        _refuse(started.run_id, contract_of(first), after)
    declared = claims.admit(contract_json(started))
    try:
        before = msgspec.json.decode(declared)
    except msgspec.DecodeError:
        raise AdmissionRefused(
            f"the contract of run {started.run_id} in {claims.dir} is unreadable: use another --run"
        ) from None
    if isinstance(before, dict):
        _refuse(started.run_id, before, after)


def declare(
    run_id: str,
    options: RecordOptions,
    agent: Agent,
    suite: Any,
    tasks: list[Task],
    versions: Any,
) -> RunStarted:
    """The run's ``RunStarted``: its contract, hashed, and the versions beside it."""
    return seal_contract(
        RunStarted(
            at=now(),
            run_id=run_id,
            argv=redact_argv(options.argv),
            agent=agent.name,
            agent_settings=agent.options(),
            model=options.model,
            endpoint=" ".join(public_endpoint(e) for e in options.endpoints or (options.endpoint,)),
            sampling=agent.settings.sampling,
            viewport=agent.settings.viewport,
            suite=suite.name,
            tasks_sha256=suite.tasks_sha256,
            prompt_source=agent.prompt_source,
            released_commit=released_commit(agent),
            released_sha256=released_sha256(agent),
            versions=versions,
            suite_version=str(getattr(suite, "suite_version", "") or ""),
            task_ids=tuple(task.task_id for task in tasks),
            max_steps=options.limits.max_steps,
            timeout_s=options.limits.timeout_s,
            repeats=options.repeats,
        )
    )
