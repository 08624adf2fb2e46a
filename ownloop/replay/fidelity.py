"""Fidelity: how a re-executed step compares with the same step of the session it replays.

A step is compared where both sessions saw it: the screenshot taken at the start of the step (so
step k shows what steps 1..k-1 did), the URL of that screenshot, and the element under the pointer
before each of the step's pointer operations (tag, id and CSS path, in operation order). A step
*diverged* when its screenshot differs by more than ``PIXEL_TOLERANCE`` of its pixels (or has
another size), its URL differs, or a pointer operation met another element. A child step with no
step to compare in the parent has diverged too.

A guarded replay's step (one with ``GuardChecked`` events, see :mod:`ownloop.replay.guard`) also
gets the rung of each replayed operation, counted, and its lowest rung: a failed operation is
``failed``; a pointer operation the guard checked has the guard's rung (an operation it stopped or
forked at too); any other operation is ``exact`` when the step's picture matched, else
``same_target``. Operations a fork's live model ran are not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from ownloop.replay.fold import Step
from ownloop.replay.pixels import decoded
from ownloop.store.events import (
    BrowserActed,
    Element,
    Event,
    FidelityMeasured,
    GuardChecked,
    MouseClick,
    MouseDown,
    MouseMove,
    MouseUp,
    MouseWheel,
    ScreenshotTaken,
    now,
)

__all__ = ["PIXEL_TOLERANCE", "RUNGS", "measure_step", "pixel_diff", "rungs_of"]

RUNGS = ("exact", "same_target", "retargeted", "diverged", "failed")

PIXEL_TOLERANCE = 0.001
"""The fraction of pixels a screenshot may differ by and still count as the same step: 0.1%
(1,024 pixels of a 1280x800 screenshot, about ten characters of text).

Measured on re-executed MiniWoB sessions: a step's screenshot is byte-identical unless time shows
in it — the text caret blinks (about 15 pixels) and MiniWoB's scoreboard counts seconds down and
scales the last reward by time (up to about 400 pixels, 0.04%). ``screenshot_identical`` stays
strict (same bytes) and ``pixel_diff`` is stored, for stricter queries.
"""

_POINTER_OPS = (MouseClick, MouseMove, MouseDown, MouseUp, MouseWheel)


def pixel_diff(first: bytes, second: bytes) -> float | None:
    """The fraction of pixels that differ (in any channel) between two images; None if their
    sizes differ."""
    from PIL import ImageChops

    one, two = decoded(first), decoded(second)
    if one.size != two.size:
        return None
    if one.mode != two.mode or one.mode not in ("RGB", "RGBA"):
        one, two = one.convert("RGBA"), two.convert("RGBA")
    difference = ImageChops.difference(one, two)
    box = difference.getbbox(alpha_only=False)
    if box is None:
        return 0.0
    # Count inside the box only: differences are usually small (a caret, a clock).
    bands = difference.crop(box).split()
    changed = bands[0]
    for band in bands[1:]:
        changed = ImageChops.lighter(changed, band)
    count = changed.point(lambda value: 255 if value else 0).histogram()[255]
    return count / (one.size[0] * one.size[1])


def _element_key(element: Element | None) -> tuple[str, str, str] | None:
    return None if element is None else (element.tag, element.id, element.css_path)


def _pointer_elements(effects: Sequence[BrowserActed]) -> list[tuple[str, str, str] | None]:
    return [_element_key(e.element) for e in effects if isinstance(e.op, _POINTER_OPS)]


def rungs_of(batch: Sequence[Event]) -> list[str]:
    """The rung of each replayed operation of a guarded step, in operation order; [] when the
    step was not guarded."""
    checks = [e for e in batch if isinstance(e, GuardChecked)]
    picture = next((c for c in checks if c.check == "screenshot"), None)
    if picture is None:
        return []
    by_op = {c.idx: c for c in checks if c.check == "element" and c.idx is not None}
    handed = min(
        (
            c.idx
            for c in by_op.values()
            if c.on_diverge in ("stop", "fork") and c.rung == "diverged" and c.idx is not None
        ),
        default=None,
    )
    rungs: list[str] = []
    for effect in (e for e in batch if isinstance(e, BrowserActed)):
        if handed is not None and effect.idx >= handed:
            break  # the live model's operations, after a fork
        check = by_op.get(effect.idx)
        if not effect.ok:
            rungs.append("failed")
        elif check is not None:
            rungs.append(check.rung)
        else:
            rungs.append("exact" if picture.passed else "same_target")
    if handed is not None:
        rungs.append("diverged")  # the operation stopped or forked at
    return rungs


def measure_step(
    step: int,
    batch: Sequence[Event],
    parent: Step | None,
    *,
    parent_session_id: str,
    load_blob: Callable[[str], bytes],
    rebase_url: Callable[[str], str] = lambda url: url,
) -> FidelityMeasured | None:
    """The FidelityMeasured of a replayed step, from the step's own events; None when the step
    took no screenshot (it failed before one).

    Args:
        step: the step's number.
        batch: the replayed step's events (its ScreenshotTaken and BrowserActed events).
        parent: the same step of the parent session, or None when the parent has no such step.
        parent_session_id: the session replayed.
        load_blob: reads a screenshot by sha256, in any format Pillow reads (only pixels are
            compared).
        rebase_url: the parent's URL as it reads in the replay (a suite's server may have moved).
    """
    shot = next((e for e in batch if isinstance(e, ScreenshotTaken)), None)
    if shot is None:
        return None
    first = batch[0]
    # Nothing to compare with counts as diverged; a comparison fills in the rest below.
    unmatched = FidelityMeasured(
        at=now(),
        run_id=first.run_id,
        session_id=first.session_id,
        step=step,
        parent_session_id=parent_session_id,
        diverged=True,
    )
    if parent is None or parent.screenshot is None:
        return unmatched
    recorded = parent.screenshot
    identical = recorded.sha256 == shot.sha256
    diff = 0.0 if identical else pixel_diff(load_blob(recorded.sha256), load_blob(shot.sha256))
    url_equal = rebase_url(recorded.url) == shot.url
    mine = _pointer_elements([e for e in batch if isinstance(e, BrowserActed)])
    theirs = _pointer_elements(parent.effects)
    element_equal = None if not mine and not theirs else mine == theirs
    same_picture = diff is not None and diff <= PIXEL_TOLERANCE
    rungs = rungs_of(batch)
    return msgspec.structs.replace(
        unmatched,
        at=now(),
        screenshot_identical=identical,
        pixel_diff=diff,
        url_equal=url_equal,
        element_equal=element_equal,
        diverged=not same_picture or not url_equal or element_equal is False,
        rung=max(rungs, key=RUNGS.index) if rungs else "",
        exact_ops=rungs.count("exact"),
        same_target_ops=rungs.count("same_target"),
        retargeted_ops=rungs.count("retargeted"),
        diverged_ops=rungs.count("diverged"),
        failed_ops=rungs.count("failed"),
    )
