"""Two sessions side by side, step by step: actions, URLs, screenshots (by sha256), outcome."""

from __future__ import annotations

import msgspec
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ownloop.replay.fold import Session, Step
from ownloop.replay.render import actions_text, plain

__all__ = ["SessionDiff", "StepDiff", "diff_sessions", "diff_view", "step_url"]


class StepDiff(msgspec.Struct, frozen=True, kw_only=True):
    """One step of both sessions (texts are "" where a session has no such step)."""

    step: int
    actions_a: str
    actions_b: str
    url_a: str
    url_b: str
    screenshot_a: str
    screenshot_b: str
    same_actions: bool
    same_url: bool
    same_screenshot: bool

    @property
    def same(self) -> bool:
        return self.same_actions and self.same_url and self.same_screenshot

    def what_differs(self) -> list[str]:
        return [
            name
            for name, same in (
                ("actions", self.same_actions),
                ("url", self.same_url),
                ("screenshot", self.same_screenshot),
            )
            if not same
        ]


class SessionDiff(msgspec.Struct, frozen=True, kw_only=True):
    """How two sessions compare."""

    a: str
    b: str
    steps: tuple[StepDiff, ...]
    outcome_a: str
    outcome_b: str

    @property
    def same_outcome(self) -> bool:
        return self.outcome_a == self.outcome_b

    @property
    def first_difference(self) -> int | None:
        """The first step that differs, or None."""
        return next((s.step for s in self.steps if not s.same), None)

    @property
    def identical(self) -> bool:
        return self.first_difference is None and self.same_outcome

    def summary(self) -> str:
        """One line: identical, or where and how the two differ."""
        if self.identical:
            return (
                f"identical: {len(self.steps)} steps with the same actions, URLs and "
                "screenshots, and the same outcome"
            )
        parts = []
        first = self.first_difference
        if first is not None:
            step = next(s for s in self.steps if s.step == first)
            differing = sum(not s.same for s in self.steps)
            parts.append(
                f"{differing} of {len(self.steps)} steps differ, first at step {first} "
                f"({', '.join(step.what_differs())})"
            )
        if not self.same_outcome:
            parts.append("the outcome differs")
        return "different: " + "; ".join(parts)


def _outcome(session: Session) -> str:
    grade = session.latest_grade
    verdict = (
        "ungraded" if grade is None else f"{'pass' if grade.passed else 'fail'} {grade.score:.2f}"
    )
    answer = "" if session.answer is None else f" answer={session.answer!r}"
    return f"{session.status} {verdict}{answer}"


def step_url(step: Step | None) -> str:
    """The URL a step started on: its screenshot's, else its first operation's, else ""."""
    if step is None:
        return ""
    if step.screenshot is not None and step.screenshot.url:
        return step.screenshot.url
    return step.effects[0].url_before if step.effects else ""


def diff_sessions(a: Session, b: Session) -> SessionDiff:
    """Compare two sessions step by step (matched by step number)."""
    steps_a = {s.step: s for s in a.steps}
    steps_b = {s.step: s for s in b.steps}
    rows = []
    for number in sorted(steps_a.keys() | steps_b.keys()):
        one, two = steps_a.get(number), steps_b.get(number)
        shot_a = one.screenshot.sha256 if one is not None and one.screenshot else ""
        shot_b = two.screenshot.sha256 if two is not None and two.screenshot else ""
        acts_a = actions_text(one.actions) if one is not None else ""
        acts_b = actions_text(two.actions) if two is not None else ""
        url_a, url_b = step_url(one), step_url(two)
        rows.append(
            StepDiff(
                step=number,
                actions_a=acts_a,
                actions_b=acts_b,
                url_a=url_a,
                url_b=url_b,
                screenshot_a=shot_a,
                screenshot_b=shot_b,
                same_actions=one is not None and two is not None and one.actions == two.actions,
                same_url=url_a == url_b,
                same_screenshot=bool(shot_a) and shot_a == shot_b,
            )
        )
    return SessionDiff(
        a=a.session_id,
        b=b.session_id,
        steps=tuple(rows),
        outcome_a=_outcome(a),
        outcome_b=_outcome(b),
    )


def _mark(same: bool) -> Text:
    return Text("=", "green") if same else Text("≠", "bold red")


def diff_view(diff: SessionDiff) -> Group:
    """A rich table of the two sessions, then the summary line."""
    # Session ids come from the journal: text, not markup, like every recorded value here.
    table = Table(
        title=Text(f"{plain(diff.a)}  vs  {plain(diff.b)}"), header_style="bold", show_lines=True
    )
    for name in ("step", f"A {plain(diff.a)}", f"B {plain(diff.b)}", "act", "url", "shot"):
        table.add_column(Text(name), overflow="fold")
    for row in diff.steps:
        cell_a = Text(plain(row.actions_a, 300) or "(no step)")
        cell_b = Text(plain(row.actions_b, 300) or "(no step)")
        cell_a.append(f"\n{plain(row.url_a, 100)}", "blue")
        cell_a.append(f"\nshot {plain(row.screenshot_a[:12]) or '-'}", "dim")
        # B repeats the URL and screenshot only where they differ from A's
        if not row.same_url:
            cell_b.append(f"\n{plain(row.url_b, 100)}", "blue")
        if not row.same_screenshot:
            cell_b.append(f"\nshot {plain(row.screenshot_b[:12]) or '-'}", "dim")
        table.add_row(
            str(row.step),
            cell_a,
            cell_b,
            _mark(row.same_actions),
            _mark(row.same_url),
            _mark(row.same_screenshot),
        )
    table.add_row(
        "end",
        Text(plain(diff.outcome_a, 200)),
        Text(plain(diff.outcome_b, 200)),
        _mark(diff.same_outcome),
        Text(""),
        Text(""),
    )
    style = "bold green" if diff.identical else "bold red"
    return Group(table, Text(diff.summary(), style))
