"""Two sessions aligned step by step on what each step did, and where they first part.

A step's signature is its action kinds and the element each pointer action hit (typed text,
keys, URLs and answers for the others), not its step number, so one extra step does not make
every later step look different. The first step where the alignment breaks is the first
divergent step.
"""

from __future__ import annotations

import difflib

import msgspec

from ownloop.replay.fold import Session, Step
from ownloop.replay.render import element_text
from ownloop.store.events import Action
from ownloop.store.text import visible

__all__ = ["Divergence", "first_divergence"]

# What identifies a non-pointer action besides its kind.
_TEXT_FIELDS = {
    "type": "text",
    "hotkey": "keys",
    "key_down": "key",
    "key_up": "key",
    "goto": "url",
    "search": "query",
    "finish": "answer",
    "scroll": "direction",
}


class Divergence(msgspec.Struct, frozen=True, kw_only=True):
    """Where the representative pair of a flipped task first parts."""

    session_a: str
    session_b: str
    step_a: int | None  # None: A has no step there (it ended)
    step_b: int | None
    did_a: str  # what that step did: "click button#ok 'OK'; type 'hi'", or "" (no step)
    did_b: str
    same_before: int  # aligned steps that agree before the divergence
    rejoined: tuple[int, int] | None = None  # (step of A, step of B) where they agree again

    def line(self) -> str:
        if self.step_a is None and self.step_b is None:
            return (
                f"the same {self.same_before} steps in {self.session_a} and "
                f"{self.session_b}: only the outcome differs"
            )
        if self.step_a is None:
            where = f"B step {self.step_b} has no counterpart in A: {self.did_b}"
        elif self.step_b is None:
            where = f"A step {self.step_a} has no counterpart in B: {self.did_a}"
        else:
            where = f"A step {self.step_a} / B step {self.step_b}: {self.did_a} vs {self.did_b}"
        again = (
            ""
            if self.rejoined is None
            else f"; they agree again from A step {self.rejoined[0]} / B step {self.rejoined[1]}"
        )
        return f"first divergent step {where}{again} ({self.session_a} vs {self.session_b})"


# ------------------------------------------------------------------ aligning two sessions
def _did(action: Action, step: Step, idx: int) -> str:
    """What one action did: its kind and the element its pointer operation hit, or its text."""
    kind = str(type(action).__struct_config__.tag)
    element = next(
        (e.element for e in step.effects if e.action_idx == idx and e.element is not None), None
    )
    if element is not None:
        return f"{kind} {element_text(element)}"
    field = _TEXT_FIELDS.get(kind)
    value = getattr(action, field, None) if field else None
    if isinstance(value, tuple):
        value = "+".join(map(str, value))
    return kind if value is None else f"{kind} {visible(value, 60, one_line=True)!r}"


def _signature(step: Step) -> str:
    if not step.actions:
        return "no action"
    return "; ".join(_did(action, step, idx) for idx, action in enumerate(step.actions))


def first_divergence(a: Session, b: Session) -> Divergence:
    """Where two sessions first part, their steps aligned on what each step did."""
    sig_a = [_signature(s) for s in a.steps]
    sig_b = [_signature(s) for s in b.steps]
    blocks = difflib.SequenceMatcher(None, sig_a, sig_b, autojunk=False).get_opcodes()
    start = next((i for i, block in enumerate(blocks) if block[0] != "equal"), None)
    if start is None:
        return Divergence(
            session_a=a.session_id,
            session_b=b.session_id,
            step_a=None,
            step_b=None,
            did_a="",
            did_b="",
            same_before=len(sig_a),
        )
    tag, i1, _, j1, _ = blocks[start]
    rejoined = next(
        (
            (a.steps[i].step, b.steps[j].step)
            for kind, i, _, j, _ in blocks[start:]
            if kind == "equal"
        ),
        None,
    )
    # "insert": B's steps from j1 have no counterpart in A; "delete": the other way round
    in_a = tag != "insert" and i1 < len(sig_a)
    in_b = tag != "delete" and j1 < len(sig_b)
    return Divergence(
        session_a=a.session_id,
        session_b=b.session_id,
        step_a=a.steps[i1].step if in_a else None,
        step_b=b.steps[j1].step if in_b else None,
        did_a=sig_a[i1] if in_a else "",
        did_b=sig_b[j1] if in_b else "",
        same_before=i1,
        rejoined=rejoined,
    )
