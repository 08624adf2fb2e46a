"""Guarded replay: check each replayed step against its parent before acting, and decide what to
do when the page changed.

Before each step of an ``ops`` or ``actions`` re-execution the fresh screenshot is compared with
the parent's (the same bytes, else a perceptual distance on the region around the step's first
target, else the whole picture); before each pointer operation that has a point (a click or a
move), the element under the point now is compared with the element the parent met there (tag,
role, accessible name and text; for an element with neither name nor text, its CSS path and the
size of its box). Each check is a ``GuardChecked`` event in the step's batch.

When an element check fails, ``--on-diverge`` decides:

- ``stop``: the replay ends at that step (status ``error``, the reason in its ``error``);
- ``retarget``: the recorded element is found again in the page (by role and accessible name,
  then text, then CSS path, then the nearest element of the same kind to the old box; see
  ``BrowserSession.find_element``) and the operation acts at its centre; the match is recorded;
- ``fork``: the step, and every later one, is handed to the live model;
- ``ignore``: the operation acts at the recorded point, as an unguarded replay does.

Every replayed operation gets a rung (``RUNGS``, best first): ``exact`` (the step's picture
matched and the element is the same), ``same_target`` (the picture changed, the element did
not; an operation without a point has no element to miss), ``retargeted``, ``diverged`` (acted
at the recorded point on another element, or stopped or forked there) and ``failed`` (the
operation itself failed). :mod:`ownloop.replay.fidelity` counts them per step.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ownloop.recorder.episode import Verdict
from ownloop.replay.fold import Step
from ownloop.replay.pixels import decoded
from ownloop.store.events import (
    Element,
    Event,
    GuardChecked,
    MouseClick,
    MouseMove,
    Op,
    now,
)
from ownloop.store.ids import SessionIds
from ownloop.world.browser import BrowserSession

__all__ = [
    "ON_DIVERGE",
    "PERCEPTUAL_TOLERANCE",
    "Guard",
    "Verdict",
    "element_difference",
    "perceptual_distance",
]

ON_DIVERGE = ("stop", "retarget", "fork", "ignore")

PERCEPTUAL_TOLERANCE = 0.02
"""The perceptual distance (mean absolute grey-level difference of the two regions, shrunk to
16x16, as a fraction of white) up to which a step's picture counts as unchanged. A blinking caret
or MiniWoB's seconds counter moves it by less than 0.005 on a 96x96 region; another word on a
button, or an element moved into the region, by more than 0.05."""

_REGION = 48  # half the side of the region compared around a target, in pixels
_SHRINK = (16, 16)
_BOX_TOLERANCE = 0.25  # an element without a name or text may change its size by this much


def _size_changed(before: Element, after: Element) -> bool:
    if before.bbox is None or after.bbox is None:
        return before.bbox != after.bbox
    for old, new in ((before.bbox[2], after.bbox[2]), (before.bbox[3], after.bbox[3])):
        if abs(new - old) > _BOX_TOLERANCE * max(old, 1.0):
            return True
    return False


def _label(element: Element) -> str:
    return f"{element.tag} {element.name or element.text or element.css_path!r}"


def element_difference(recorded: Element, found: Element | None) -> str:
    """ "" when ``found`` is the element recorded, else what differs, in a few words."""
    if found is None:
        return "no element there"
    if (recorded.tag, recorded.role) != (found.tag, found.role):
        return f"{_label(found)} is there instead"
    for field in ("name", "text"):
        old, new = getattr(recorded, field), getattr(found, field)
        if old != new:
            return f"its {field} {old!r} is now {new!r}"
    if not recorded.name and not recorded.text:
        # Nothing to tell it by but where it sits: its path in the document and its size.
        if recorded.css_path != found.css_path:
            return f"its css path {recorded.css_path!r} is now {found.css_path!r}"
        if _size_changed(recorded, found):
            return f"its box {recorded.bbox} is now {found.bbox}"
    return ""


def perceptual_distance(
    first: bytes, second: bytes, point: tuple[float, float] | None = None
) -> float:
    """How different two screenshots look around ``point`` (the whole picture when None): the
    mean absolute difference of the two grey regions shrunk to 16x16, 0 (same) to 1; 1 when the
    pictures have other sizes."""
    from PIL import Image, ImageChops, ImageStat

    one, two = decoded(first), decoded(second)
    if one.size != two.size:
        return 1.0
    box = (0, 0, one.size[0], one.size[1])
    if point is not None:
        x, y = int(point[0]), int(point[1])
        box = (
            max(0, x - _REGION),
            max(0, y - _REGION),
            min(one.size[0], x + _REGION),
            min(one.size[1], y + _REGION),
        )
        if box[0] >= box[2] or box[1] >= box[3]:  # a point off the picture: all of it
            box = (0, 0, one.size[0], one.size[1])
    # Cropped before it is made grey: the same pixels, without converting the whole picture.
    shrunk = [
        image.crop(box).convert("L").resize(_SHRINK, Image.Resampling.BOX) for image in (one, two)
    ]
    difference = ImageChops.difference(shrunk[0], shrunk[1])
    return round(float(ImageStat.Stat(difference).mean[0]) / 255.0, 6)


def _point(op: Op) -> tuple[float, float] | None:
    return (op.x, op.y) if isinstance(op, MouseClick | MouseMove) else None


def _first_point(step: Step | None) -> tuple[float, float] | None:
    for effect in step.effects if step is not None else ():
        point = _point(effect.op)
        if point is not None:
            return point
    return None


def _where(op: Op) -> str:
    point = _point(op)
    return f" at ({point[0]:g}, {point[1]:g})" if point else ""


class Guard:
    """The checks of one guarded replay (see the module docstring).

    Args:
        parent_session_id: the session replayed.
        on_diverge: ``stop``, ``retarget``, ``fork`` or ``ignore``.
        load_blob: reads a screenshot by sha256, in any format Pillow reads (a compacted one's
            WebP as stored: only its pixels are compared).
        page: the replay's browser session, whose elements the operations are checked on.
    """

    def __init__(
        self,
        parent_session_id: str,
        on_diverge: str,
        load_blob: Callable[[str], bytes],
        page: BrowserSession,
    ) -> None:
        self.parent_session_id, self.on_diverge = parent_session_id, on_diverge
        self.load_blob, self.page = load_blob, page
        self.picture_same = True  # the current step's screenshot check

    def _begun(self, ids: SessionIds, step: int) -> GuardChecked:
        """A check of ``step`` as it starts (now); each check replaces the fields it found."""
        return GuardChecked(
            at=now(),
            run_id=ids["run_id"],
            session_id=ids["session_id"],
            step=step,
            parent_session_id=self.parent_session_id,
        )

    def check_screenshot(
        self, ids: SessionIds, step: int, recorded: Step | None, sha256: str, batch: list[Event]
    ) -> bool:
        """Compare the step's fresh screenshot (``sha256``) with the parent's; add the check to
        ``batch``. True when they look the same."""
        shot = recorded.screenshot if recorded is not None else None
        if shot is None:
            passed, distance, reason = False, None, "the parent has no screenshot of this step"
        elif shot.sha256 == sha256:
            passed, distance, reason = True, 0.0, ""
        else:
            point = _first_point(recorded)
            distance = perceptual_distance(
                self.load_blob(shot.sha256), self.load_blob(sha256), point
            )
            passed = distance <= PERCEPTUAL_TOLERANCE
            where = "around the target" if point else "on the page"
            reason = "" if passed else f"the picture {where} changed (distance {distance:.3f})"
        self.picture_same = passed
        batch.append(
            msgspec.structs.replace(
                self._begun(ids, step),
                check="screenshot",
                passed=passed,
                distance=distance,
                reason=reason,
            )
        )
        return passed

    def check_op(
        self,
        ids: SessionIds,
        step: int,
        index: int,
        op: Op,
        recorded: Element | None,
        batch: list[Event],
    ) -> Verdict:
        """Check one operation before it runs: for a click or move with a recorded element,
        compare what is under its point now; add the check to ``batch``; say what to run."""
        point = _point(op)
        if point is None or recorded is None:
            return Verdict(op, "act")
        found = self.page.element_at(*point)
        reason = element_difference(recorded, found)
        checked = msgspec.structs.replace(
            self._begun(ids, step),
            idx=index,
            recorded=recorded,
            found=found,
            x=point[0],
            y=point[1],
        )
        if not reason:
            rung = "exact" if self.picture_same else "same_target"
            batch.append(msgspec.structs.replace(checked, passed=True, rung=rung))
            return Verdict(op, "act")
        reason = f"{_label(recorded)}{_where(op)}: {reason}"
        if self.on_diverge == "retarget":
            refound = self.page.find_element(recorded)
            if refound is not None:
                batch.append(
                    msgspec.structs.replace(
                        checked,
                        reason=reason,
                        found=refound.element,
                        on_diverge="retarget",
                        match=refound.match,
                        x=refound.x,
                        y=refound.y,
                        rung="retargeted",
                    )
                )
                return Verdict(msgspec.structs.replace(op, x=refound.x, y=refound.y), "act", reason)
            reason += "; not found again"
        batch.append(
            msgspec.structs.replace(
                checked,
                reason=reason,
                on_diverge=self.on_diverge,
                match="none" if self.on_diverge == "retarget" else "",
                rung="diverged",
            )
        )
        if self.on_diverge == "stop":  # the episode ends here, saying why
            return Verdict(op, "stop", f"{reason} (--on-diverge stop)")
        return Verdict(op, "fork" if self.on_diverge == "fork" else "act", reason)
