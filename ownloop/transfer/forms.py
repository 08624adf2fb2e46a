"""The four steps.jsonl forms a plain harness writes, one per agent, and how a step fills them.

=========  ==============================================================================
uitars     ``{step, url, raw, actions, notes, fails}``; ``raw`` null and only ``fails`` when
           nothing parsed (``fails``: the responses that did not parse)
molmoweb   ``{step, url, raw, action, action_str, thought, error, action_error}``
fara7b     ``{step, raw, action, parse_error}``
opencua    ``{step, url, raw, attempts, action, code, executed, notes}``, plus ``error`` when the
           step's response did not parse
=========  ==============================================================================

Import maps ``step``, ``url`` (to the step's screenshot), ``raw`` and uitars' ``fails`` (to model
calls); every other field is kept as it was. Export fills the fields from the events, then puts
back the fields an import kept, so an imported folder exports as it came in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from ownloop.replay.fold import Step

__all__ = ["FORMS", "SIGNATURES", "form_of", "infer_form", "step_line"]

FORMS: dict[str, tuple[str, ...]] = {
    "uitars": ("step", "url", "raw", "actions", "notes", "fails"),
    "molmoweb": ("step", "url", "raw", "action", "action_str", "thought", "error", "action_error"),
    "fara7b": ("step", "raw", "action", "parse_error"),
    "opencua": ("step", "url", "raw", "attempts", "action", "code", "executed", "notes"),
}
"""Agent name -> the fields of its steps.jsonl lines, in the order the harness writes them."""


SIGNATURES: dict[str, frozenset[str]] = {
    "uitars": frozenset({"actions", "fails"}),
    "molmoweb": frozenset({"action_str", "thought", "action_error"}),
    "fara7b": frozenset({"parse_error"}),
    "opencua": frozenset({"attempts", "code", "executed"}),
}
"""Agent name -> the fields only its steps.jsonl lines have: a line with one of them says who
wrote it."""


def infer_form(lines: Iterable[Iterable[str]]) -> list[str]:
    """Whose steps.jsonl form the lines (each given by its field names) have, most lines first.

    Empty when no line has a field only one form has; several when lines disagree.
    """
    votes: dict[str, int] = {}
    for keys in lines:
        fields = set(keys)
        for agent, signature in SIGNATURES.items():
            if fields & signature:
                votes[agent] = votes.get(agent, 0) + 1
    return sorted(votes, key=lambda agent: -votes[agent])


def form_of(agent: str) -> str:
    """The steps.jsonl form for ``agent``: its own, or uitars' for an agent without one."""
    return agent if agent in FORMS else "uitars"


def step_line(agent: str, step: Step, original: dict[str, Any] | None) -> dict[str, Any] | None:
    """The steps.jsonl object for one step, or None when the step made no model call.

    Args:
        agent: whose form to write (see ``FORMS``).
        step: the folded step.
        original: what an import kept of the step's line (evidence ``imported_step``: its
            ``keys`` in order and the ``kept`` fields it did not map); None for a recorded step.
    """
    if original is not None:
        return _imported_line(step, original)
    if not step.calls:
        return None  # e.g. the screenshot after the last step: no line of its own
    accepted = step.parsed if step.parsed is not None and step.parsed.error is None else None
    parsed_ok = {p.call_id for p in step.parses if p.error is None}
    by_id = {c.call_id: c.response for c in step.calls}
    raw = by_id.get(accepted.call_id) if accepted is not None else None
    fails = [
        c.response for c in step.calls if c.response is not None and c.call_id not in parsed_ok
    ]
    parse_error = step.parsed.error if step.parsed is not None else None
    url = step.screenshot.url if step.screenshot is not None else ""
    actions = step.actions if accepted is not None else ()
    first = actions[0] if actions else None
    op_errors = [e.error or "failed" for e in step.effects if not e.ok]
    form = form_of(agent)
    if form == "uitars":
        if raw is None:
            return {"step": step.step, "url": url, "raw": None, "fails": fails}
        return {
            "step": step.step,
            "url": url,
            "raw": raw,
            "actions": [msgspec.to_builtins(a) for a in actions],
            "notes": op_errors,
            "fails": fails,
        }
    if raw is None:  # these harnesses keep the text that did not parse
        raw = next((c.response for c in reversed(step.calls) if c.response is not None), None)
    action = msgspec.to_builtins(first) if first is not None else None
    if form == "molmoweb":
        return {
            "step": step.step,
            "url": url,
            "raw": raw,
            "action": action,
            "action_str": first.raw if first is not None else "",
            "thought": step.thought,
            "error": parse_error,
            "action_error": op_errors[0] if op_errors else None,
        }
    if form == "fara7b":
        return {"step": step.step, "raw": raw, "action": action, "parse_error": parse_error}
    line = {
        "step": step.step,
        "url": url,
        "raw": raw,
        "attempts": len(step.calls),
        "action": [msgspec.to_builtins(a) for a in actions],
        "code": "\n".join(a.raw for a in actions if a.raw),
        "executed": bool(step.effects) and not op_errors,
        "notes": op_errors,
    }
    if parse_error is not None:
        line["error"] = parse_error
    return line


def _imported_line(step: Step, original: dict[str, Any]) -> dict[str, Any]:
    """The line as the harness wrote it: kept fields as they were, mapped ones from the events."""
    keys = [k for k in original.get("keys") or () if isinstance(k, str)]
    kept = original.get("kept")
    kept = kept if isinstance(kept, dict) else {}
    responses = [c.response for c in step.calls if c.response is not None]
    raw_mapped = "raw" in keys and "raw" not in kept
    mapped = {
        "step": step.step,
        "url": step.screenshot.url if step.screenshot is not None else "",
        "raw": responses[-1] if raw_mapped and responses else None,
        "fails": responses[:-1] if raw_mapped else responses,  # they came before the raw
    }
    return {key: kept[key] if key in kept else mapped.get(key) for key in keys}
