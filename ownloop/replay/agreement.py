"""How far a model judge can be trusted, from what a judging recorded.

Three measures per judge (``ownloop judge``'s report, and ``ownloop judge --report``):

- **Agreement with the rule graders**, over the sessions that have both a rule grade (their latest,
  as ``sessions.passed``) and the judge's verdict (the majority of its repeats; a tie counts as
  failed): the confusion table, the observed agreement p_o and Cohen's kappa
  ``(p_o - p_e) / (1 - p_e)``, where p_e is the agreement two raters with the same pass rates would
  reach by chance, with Cohen's (1960) large-sample standard error
  ``sqrt(p_o (1 - p_o) / (n (1 - p_e)^2))`` and a 95% interval ``kappa ± 1.96 SE`` clipped to
  [-1, 1]. With no variation (p_e = 1) kappa is undefined and none is printed.
- **Self-agreement** over repeats: the sessions whose repeats all gave one verdict, and the mean
  share of agreeing pairs of repeats.
- **Controls**: how many control sessions (screenshots blanked, answer swapped) the judge passed; a
  judge that reads the evidence fails them.

A verdict judged again (``--replay``, or the same judging twice) replaces the earlier one of the
same session, repeat and control: the latest counts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ownloop.replay.fold import Session

__all__ = [
    "JudgeReport",
    "Kappa",
    "Verdict",
    "cohen_kappa",
    "judge_report",
    "report_of",
    "reports_of",
]


class Kappa(NamedTuple):
    """Agreement of two raters on pass/fail: the confusion table and Cohen's kappa."""

    n: int
    both_pass: int
    rule_only: int  # the rule passed, the judge failed
    judge_only: int  # the judge passed, the rule failed
    both_fail: int
    observed: float  # p_o
    kappa: float | None  # None: no variation (p_e = 1), or no pair
    low: float | None
    high: float | None


def cohen_kappa(pairs: Iterable[tuple[bool, bool]]) -> Kappa:
    """Cohen's kappa of (rule, judge) verdict pairs, with its 95% interval (module docstring)."""
    table = [0, 0, 0, 0]
    for rule, judge in pairs:
        table[(0 if rule else 2) + (0 if judge else 1)] += 1
    both_pass, rule_only, judge_only, both_fail = table
    n = sum(table)
    if n == 0:
        return Kappa(0, 0, 0, 0, 0, math.nan, None, None, None)
    observed = (both_pass + both_fail) / n
    rule_rate = (both_pass + rule_only) / n
    judge_rate = (both_pass + judge_only) / n
    chance = rule_rate * judge_rate + (1 - rule_rate) * (1 - judge_rate)
    counts = (n, both_pass, rule_only, judge_only, both_fail, observed)
    if chance >= 1.0:
        return Kappa(*counts, None, None, None)
    kappa = (observed - chance) / (1 - chance)
    kappa = 0.0 if abs(kappa) < 1e-12 else kappa  # a rounding error is no sign
    se = math.sqrt(observed * (1 - observed) / (n * (1 - chance) ** 2))
    return Kappa(*counts, kappa, max(-1.0, kappa - 1.96 * se), min(1.0, kappa + 1.96 * se))


class JudgeReport(NamedTuple):
    """What a judge's recorded verdicts say about the judge."""

    judge: str
    sessions: int  # sessions with at least one verdict of the judge (not a control)
    repeats: int  # the most repeats any session has
    passed: int  # sessions whose majority verdict is passed
    kappa: Kappa
    unanimous: int  # sessions with 2+ repeats whose repeats all agree
    repeated: int  # sessions with 2+ repeats
    pairwise: float | None  # mean share of agreeing pairs of repeats over those sessions
    controls: dict[str, tuple[int, int]]  # control kind -> (passed, judged)

    def lines(self) -> list[str]:
        """The report, a line a measure."""
        k = self.kappa
        lines = [
            f"judge {self.judge}: {self.sessions} sessions judged, {self.passed} passed "
            f"by the majority of up to {self.repeats} repeats"
        ]
        if k.n == 0:
            lines.append(
                "agreement with the rule graders: no session has both a rule grade and a verdict"
            )
        else:
            value = (
                "kappa n/a (no variation)"
                if k.kappa is None
                else f"kappa {k.kappa:+.2f} (95% interval {k.low:+.2f} to {k.high:+.2f})"
            )
            lines.append(
                f"agreement with the rule graders over {k.n} sessions: {k.observed:.3f}, {value}"
            )
            lines.append(
                f"  rule pass & judge pass {k.both_pass}, rule pass & judge fail {k.rule_only}, "
                f"rule fail & judge pass {k.judge_only}, rule fail & judge fail {k.both_fail}"
            )
        if self.repeated:
            lines.append(
                f"self-agreement over repeats: {self.unanimous} of {self.repeated} sessions "
                f"unanimous ({self.unanimous / self.repeated:.3f}), pairs agreeing "
                f"{self.pairwise:.3f}"
            )
        else:
            lines.append("self-agreement over repeats: n/a (one repeat; judge with --repeat N)")
        for kind, (passed, judged) in sorted(self.controls.items()):
            what = {"blank": "blank screenshots", "swapped": "swapped answers"}.get(kind, kind)
            lines.append(f"control, {what}: {passed} of {judged} passed (a good judge fails them)")
        return lines


Verdict = tuple[str, str, int, bool, bool | None]
"""One verdict of a judge: (session id, control or "", repeat, passed, the session's rule grade
``passed`` or None), in the order they were made."""


def _session_verdicts(session: Session, grader: str) -> list[Verdict]:
    """The session's verdicts by the judge ``grader`` (``judge:NAME``), as ``Verdict`` rows."""
    rule = session.latest_grade.passed if session.latest_grade is not None else None
    out: list[Verdict] = []
    for grade in session.judgements:
        control = ""
        if grade.grader != grader:
            if not grade.grader.startswith(grader + "/control:"):
                continue
            control = grade.grader.split("/control:", 1)[1]
        try:
            repeat = int(json.loads(grade.details).get("repeat", 1))
        except (ValueError, AttributeError, TypeError):
            repeat = 1
        out.append((session.session_id, control, repeat, grade.passed, rule))
    return out


def _pairs_agreeing(verdicts: Sequence[bool]) -> float:
    n = len(verdicts)
    yes = sum(verdicts)
    pairs = n * (n - 1) / 2
    return (yes * (yes - 1) / 2 + (n - yes) * (n - yes - 1) / 2) / pairs


def judge_report(sessions: Iterable[Session], judge: str) -> JudgeReport:
    """The report of judge ``judge`` (its name) over ``sessions`` (see the module docstring)."""
    grader = f"judge:{judge}"
    return report_of(judge, [v for s in sessions for v in _session_verdicts(s, grader)])


def report_of(judge: str, verdicts: Iterable[Verdict]) -> JudgeReport:
    """The report of judge ``judge`` from its verdicts (the latest of each session, control and
    repeat counts)."""
    latest: dict[tuple[str, str, int], bool] = {}
    rules: dict[str, bool | None] = {}
    for session_id, control, repeat, passed, rule in verdicts:
        latest[session_id, control, repeat] = passed
        rules[session_id] = rule
    own: dict[str, list[bool]] = {}
    controls: dict[str, list[int]] = {}
    for (session_id, control, _), passed in sorted(latest.items()):
        if control:
            seen = controls.setdefault(control, [0, 0])
            seen[0] += passed
            seen[1] += 1
        else:
            own.setdefault(session_id, []).append(passed)
    pairs: list[tuple[bool, bool]] = []
    agreeing: list[float] = []
    unanimous = passed_sessions = most = 0
    for session_id, mine in own.items():
        most = max(most, len(mine))
        majority = sum(mine) * 2 > len(mine)
        passed_sessions += majority
        if len(mine) > 1:
            agreeing.append(_pairs_agreeing(mine))
            unanimous += len(set(mine)) == 1
        rule = rules.get(session_id)
        if rule is not None:
            pairs.append((rule, majority))
    return JudgeReport(
        judge=judge,
        sessions=len(own),
        repeats=most,
        passed=passed_sessions,
        kappa=cohen_kappa(pairs),
        unanimous=unanimous,
        repeated=len(agreeing),
        pairwise=sum(agreeing) / len(agreeing) if agreeing else None,
        controls={kind: (seen[0], seen[1]) for kind, seen in controls.items()},
    )


def reports_of(
    rows: Iterable[tuple[str, str, str | None, int | None, bool, bool | None]],
) -> list[JudgeReport]:
    """One report per judge, in name order, from a run's verdict rows as
    ``store.queries.run_judge_verdicts`` gives them (judge, session, control, repeat, passed,
    rule)."""
    by_judge: dict[str, list[Verdict]] = {}
    for judge, session, control, repeat, passed, rule in rows:
        by_judge.setdefault(judge, []).append((session, control or "", repeat or 1, passed, rule))
    return [report_of(judge, verdicts) for judge, verdicts in sorted(by_judge.items())]
