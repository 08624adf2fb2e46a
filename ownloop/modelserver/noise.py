"""Noise for the scripted expert: with probability P a step answers a plausible wrong action.

``serve-model --noise P --noise-seed S`` makes the expert fallible, so repeats of one task
disagree the way a sampled model's do. The draws are seeded and counted: the n-th time the expert
is asked step k of one episode (a MiniWoB task and seed, whatever server serves its page), the draw
is ``sha256(S, episode, k, n)``. So the same seed gives the same answers to the same requests in the
same order (one worker), in any record run, and repeats of a task (the same episode asked again)
each get their own draw.

A wrong action is one a model could plausibly emit: a click on another element of the page (or
beside the target when there is none), text typed with its last character dropped.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

from ownloop.errors import OwnloopError
from ownloop.modelserver.plans import Widget
from ownloop.store.events import Action, Click, TypeText

__all__ = ["Noise", "mislead"]

_MISS_PX = 60.0  # how far beside its target a wrong click lands when the page has no other element


class Noise:
    """Seeded draws deciding which steps the expert gets wrong.

    Args:
        probability: the chance, per step with a click or typed text, of a wrong action.
        seed: makes the draws reproducible.
    """

    def __init__(self, probability: float, seed: int = 0) -> None:
        if not 0.0 <= probability <= 1.0:
            raise OwnloopError(f"--noise is a probability from 0 to 1, not {probability}")
        self.probability = probability
        self.seed = seed
        self._asked: dict[str, int] = {}
        self._lock = threading.Lock()

    def draw(self, key: str) -> float:
        """The next uniform number in [0, 1) for ``key`` (e.g. a start URL and a step)."""
        with self._lock:
            n = self._asked.get(key, 0)
            self._asked[key] = n + 1
        digest = hashlib.sha256(f"{self.seed}\x00{key}\x00{n}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def wrong(self, key: str) -> float | None:
        """None when this step is answered right; else a second draw that picks the wrong action."""
        if self.probability <= 0.0:
            return None
        if self.draw(key) >= self.probability:
            return None
        return self.draw(key + "\x00which")


def mislead(
    actions: Sequence[Action], widgets: Sequence[Widget], pick: float
) -> tuple[Action, ...]:
    """``actions`` with each click moved to another element and typed text cut short.

    Args:
        actions: the step's right actions (page CSS px).
        widgets: the page's elements, the candidates for a wrong click.
        pick: a uniform number in [0, 1) choosing among them.
    """
    out: list[Action] = []
    for action in actions:
        if isinstance(action, Click):
            out.append(_elsewhere(action, widgets, pick))
        elif isinstance(action, TypeText):
            text = action.text[:-1] if len(action.text) > 1 else action.text + "x"
            out.append(TypeText(text=text))
        else:
            out.append(action)
    return tuple(out)


def _elsewhere(click: Click, widgets: Sequence[Widget], pick: float) -> Click:
    """A click on another visible element than the one under ``click``, else beside it."""
    others = [
        w
        for w in widgets
        if w.visible and w.box[2] > 0 and w.box[3] > 0 and not _contains(w, click.x, click.y)
    ]
    if not others:
        return Click(x=click.x + _MISS_PX, y=click.y + _MISS_PX / 2)
    x, y = others[min(int(pick * len(others)), len(others) - 1)].centre
    return Click(x=x, y=y)


def _contains(widget: Widget, x: float, y: float) -> bool:
    left, top, width, height = widget.box
    return left <= x <= left + width and top <= y <= top + height
