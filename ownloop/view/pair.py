"""Two sessions side by side, opened at their first divergent step (the compare grid's cells).

Steps are aligned as ``ownloop compare`` aligns them (``first_divergence``: on what each step
did, not its number). Every step before the divergence agrees, so those pair in order; from the
divergence on they pair in order too, which is what one reads when scrolling down.
"""

from __future__ import annotations

from itertools import zip_longest
from typing import NamedTuple

from ownloop.replay.compare import Divergence, first_divergence
from ownloop.replay.fold import Session
from ownloop.view.page import ImageUrl, SessionPage, StepView, build_page

__all__ = ["PairPage", "build_pair"]


class PairPage(NamedTuple):
    left: SessionPage
    right: SessionPage
    divergence: Divergence
    rows: list[tuple[int, StepView | None, StepView | None]]  # (row number from 1, left, right)
    divergent_row: int | None  # the row of the first divergent step; None: no step differs


def build_pair(a: Session, b: Session, image_url: ImageUrl) -> PairPage:
    """The pair page of sessions ``a`` (left) and ``b`` (right)."""
    left, right = build_page(a, image_url), build_page(b, image_url)
    divergence = first_divergence(a, b)
    rows = [
        (number, mine, theirs)
        for number, (mine, theirs) in enumerate(zip_longest(left.steps, right.steps), start=1)
    ]
    row = None
    if divergence.step_a is not None or divergence.step_b is not None:
        row = divergence.same_before + 1
    return PairPage(left, right, divergence, rows, row)
