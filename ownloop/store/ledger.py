"""A run's ledger as the store knows it: its declared contract and where its sessions stand.

The contract is what makes two runs comparable, and what a resume (or a second recorder on the
same run) must match: the agent and its settings, the model, sampling, viewport, prompt source,
the suite with its source hash and version, the task ids (which carry MiniWoB seeds), the step
budget, the task timeout and the repeats. ``config_sha256`` is the sha256 of its canonical JSON
(sorted keys, no spaces).

Left out on purpose: the endpoint URL (declared in ``RunStarted``, without credentials, but where
a model is served from is operational: a resume after the server moved to another port, or two
recorders each with its own replica of the model, are the same run; the model name is in the
contract), argv and times (they differ between two invocations of the same run), the run id (two
runs with one contract should have one hash), and the versions of ownloop, git,
Python, Playwright, Chromium and the OS: they are recorded beside the contract in ``RunStarted``
so a reader can compare them, but a patch release of Python on a second machine does not make two
campaigns incomparable. Harness settings that only change how a run is executed (workers, call
retries, settle time) are in argv.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from ownloop.store.events import RunStarted

if TYPE_CHECKING:
    from ownloop.store import Store

__all__ = [
    "CONTRACT_FIELDS",
    "LedgerSession",
    "config_sha256",
    "contract_diff",
    "contract_json",
    "contract_of",
    "first_run_started",
    "ledger_sessions",
    "mixed_budget_lines",
    "mixed_budgets",
]

CONTRACT_FIELDS = (
    "agent",
    "agent_settings",
    "model",
    "sampling",
    "viewport",
    "prompt_source",
    "suite",
    "tasks_sha256",
    "suite_version",
    "task_ids",
    "max_steps",
    "timeout_s",
    "repeats",
)


def contract_of(started: RunStarted) -> dict[str, Any]:
    """The contract fields of a ``RunStarted``, as JSON-ready values."""
    values = {name: getattr(started, name) for name in CONTRACT_FIELDS}
    decoded: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(values))  # tuples: lists
    return decoded


def contract_json(started: RunStarted) -> bytes:
    """The contract's canonical JSON: sorted keys, no spaces, UTF-8."""
    return json.dumps(
        contract_of(started), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()


def config_sha256(started: RunStarted) -> str:
    """The sha256 of the contract's canonical JSON."""
    return hashlib.sha256(contract_json(started)).hexdigest()


def _show(name: str, value: Any) -> str:
    if isinstance(value, list) and len(value) > 3:
        text = f"[{len(value)} items: {', '.join(map(str, value[:2]))}, ...]"
    elif isinstance(value, str) and len(value) == 64 and name.endswith("sha256"):
        text = value[:12]
    else:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        if isinstance(value, str | int | float) or value is None:
            text = str(value) if not isinstance(value, str) else text
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{name}={text}"


def contract_diff(before: dict[str, Any], after: dict[str, Any]) -> tuple[str, str] | None:
    """What changed between two contracts, as ("max_steps=40", "max_steps=20"), or None."""
    changed = [name for name in CONTRACT_FIELDS if before.get(name) != after.get(name)]
    if not changed:
        return None
    return (
        ", ".join(_show(n, before.get(n)) for n in changed),
        ", ".join(_show(n, after.get(n)) for n in changed),
    )


def first_run_started(store: Store, run_id: str) -> RunStarted | None:
    """The first ``RunStarted`` of a run (the one that declared its contract), or None."""
    rows = store.sql(
        "select stream, seq from run_started where run_id = $run order by time, stream, seq "
        "limit 1",
        {"run": run_id},
    ).rows
    if not rows:
        return None
    stream, seq = rows[0]
    for number, event in enumerate(store.read_stream(stream), start=1):
        if number == seq and isinstance(event, RunStarted):
            return event
    return None


class LedgerSession(NamedTuple):
    """Where one session of a run stands (replays left out)."""

    session_id: str
    task_id: str
    repeat: int
    attempt: int
    status: str | None  # None: no end yet
    counted: bool | None  # None: no SessionCounted yet


def ledger_sessions(store: Store, run_id: str) -> list[LedgerSession]:
    """The sessions ``run_id`` recorded, replays left out, in the order they ended (open ones
    last, by start)."""
    rows = store.sql(
        "select session_id, task_id, coalesce(repeat, 1), coalesce(attempt, 1), status, counted "
        "from sessions where run_id = $run and parent_session_id is null "
        "order by ended_at nulls last, started_at, session_id",
        {"run": run_id},
    ).rows
    return [LedgerSession(str(s), str(t), int(r), int(a), st, c) for s, t, r, a, st, c in rows]


def mixed_budgets(store: Store, run_id: str) -> str | None:
    """A line saying that a run's sessions ran under more than one step budget (or under another
    than the run declared), so its results are not comparable; None when they all share one."""
    lines = mixed_budget_lines(store, run_id)
    return lines[0] if lines else None


def mixed_budget_lines(store: Store, run_id: str | None = None) -> list[str]:
    """``mixed_budgets`` of one run, or of every run (None), in one query."""
    rows = store.sql(
        "select run_id, budget, budgets from runs where $run is null or run_id = $run "
        "order by started_at",
        {"run": run_id},
    ).rows
    lines = []
    for run, declared, found in rows:
        budgets = [int(b) for b in found or []]
        if len(budgets) <= 1 and (declared is None or budgets in ([], [declared])):
            continue
        used = " and ".join(map(str, budgets))
        lines.append(
            f"mixed step budgets: run {run} declared {declared} steps but its sessions "
            f"ran under {used}; compare only sessions where comparable (ownloop sessions "
            "shows it)"
        )
    return lines
