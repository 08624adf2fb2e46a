"""``ownloop judge``: a model judges recorded sessions, offline, and every call is recorded.

For each selected session that ended with an outcome, a judge (``ownloop.replay.judges``) builds
its requests from the recorded trajectory and a caller answers them: the live endpoint
(``ModelClient``), or, with ``replay``, the judge calls recorded before (a cassette: the same
request, the same repeat). All of a judging's events go to ONE new stream: each call a
``ModelCalled`` (``purpose = "judge"``, ``step = -1``: a judge's call belongs to no step of the
session it judges, so a fold leaves it out), each verdict a ``SessionGraded`` with ``source =
"judge"``, grader ``judge:NAME`` (``judge:NAME/control:KIND`` for a control), the judge's version
and its reasoning. A judge's grades are never a session's grade: ``sessions`` and every score
keep reading the rule graders', and the ``judge_grades`` view holds the judges'.

Controls (``controls``): each session is judged once more with every screenshot blanked, and once
with another session's answer in place of its own; a judge that passes them is not looking.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import NamedTuple

import msgspec

from ownloop.errors import OwnloopError
from ownloop.grading import UNGRADED
from ownloop.recorder.call import CallContext, CallOutcome, CallRequest, ModelCaller
from ownloop.replay.agreement import JudgeReport, judge_report
from ownloop.replay.fold import Session
from ownloop.replay.judges import (
    KEY_SCORE,
    Judge,
    JudgeError,
    Shot,
    load_judge,
    read_score,
    read_verdict,
)
from ownloop.replay.selection import Selection, fold_selected
from ownloop.store import Store
from ownloop.store.events import (
    Message,
    ModelCalled,
    Sampling,
    SessionGraded,
    now,
)
from ownloop.store.ids import new_id

__all__ = [
    "JUDGE_SAMPLING",
    "JudgeOptions",
    "JudgeOutcome",
    "Judging",
    "RecordedJudgeCalls",
    "judge",
    "judge_sessions",
]

JUDGE_SAMPLING = Sampling(temperature=0.0, max_tokens=1024)
"""How a judge is sampled (a repeat then measures the endpoint's own nondeterminism); the
scripted judge's noise, or a temperature of the user's, makes repeats differ."""
_MAX_KEY_SHOTS = 4


class Judging(msgspec.Struct, frozen=True, kw_only=True):
    """What a judging did."""

    judge: str
    version: str
    selected: int  # sessions the selection picked
    judged: int  # sessions judged (those that ended with an outcome)
    repeats: int
    passed: int  # verdicts (not controls) that said passed
    failed: int
    unreadable: int  # answers with no verdict line
    unanswered: int  # calls the endpoint never answered (or, replaying, that were not recorded)
    controls: int = 0  # control verdicts recorded
    calls: int = 0
    stream: str | None = None
    seconds: float = 0.0


class _Run:
    """One judging in progress: its caller, its events, its counts."""

    def __init__(self, store: Store, caller: ModelCaller, judge: Judge) -> None:
        self.store, self.caller, self.judge = store, caller, judge
        self.events: list[ModelCalled | SessionGraded] = []
        self.counts = {"passed": 0, "failed": 0, "unreadable": 0, "unanswered": 0, "controls": 0}
        self.calls = 0
        self._blank: dict[tuple[int, int], str] = {}

    def ask(self, session: Session, messages: tuple[Message, ...], repeat: int) -> str | None:
        context = CallContext(session.run_id, session.session_id, -1, repeat, "judge")
        outcome = self.caller.call(CallRequest(messages, JUDGE_SAMPLING, context))
        self.events.extend(outcome.events)
        self.calls += len(outcome.events)
        return outcome.text

    def blank(self, shot: Shot) -> Shot:
        """The screenshot's size in plain white, as a blob (made once per size)."""
        from PIL import Image

        size = (max(shot.width, 1), max(shot.height, 1))
        if size not in self._blank:
            out = io.BytesIO()
            Image.new("RGB", size, "white").save(out, format="PNG")
            self._blank[size] = self.store.put_blob(out.getvalue())
        return Shot(shot.step, self._blank[size], size[0], size[1])

    def grade(self, session: Session, answer: str | None, repeat: int, control: str) -> None:
        if answer is None:
            self.counts["unanswered"] += 1
            return
        try:
            verdict = read_verdict(self.judge, answer)
        except JudgeError:
            self.counts["unreadable"] += 1
            return
        grader = f"judge:{self.judge.name}" + (f"/control:{control}" if control else "")
        key = "controls" if control else ("passed" if verdict.passed else "failed")
        self.counts[key] += 1
        details = {"repeat": repeat, "control": control, "reasoning": verdict.reasoning}
        self.events.append(
            SessionGraded(
                at=now(),
                run_id=session.run_id,
                session_id=session.session_id,
                grader=grader,
                grader_version=self.judge.version,
                score=float(verdict.passed),
                passed=verdict.passed,
                details=json.dumps(details, ensure_ascii=False),
                source="judge",
            )
        )


def _shots(session: Session) -> list[Shot]:
    return [
        Shot(
            s.step,
            s.screenshot.sha256,
            s.screenshot.width,
            s.screenshot.height,
            s.screenshot.media_type,
        )
        for s in session.steps
        if s.screenshot is not None
    ]


def _judge_once(
    run: _Run,
    session: Session,
    repeat: int,
    *,
    control: str = "",
    answer: str = "",
) -> None:
    """One verdict on a session: the judge's stages, each call recorded, then its grade."""
    judge = run.judge
    shots = _shots(session)
    if control == "blank":
        shots = [run.blank(shot) for shot in shots]
    seen = judge.seen(shots)
    key_points = ""
    if judge.staged:
        key_points = run.ask(session, judge.key_points_request(session), repeat) or ""
        scored = []
        for shot in seen:
            score = read_score(
                run.ask(session, judge.scoring_request(session, shot, key_points), repeat) or ""
            )
            scored.append((score or 0, shot.step, shot))
        best = sorted((s for s in scored if s[0] >= KEY_SCORE), key=lambda s: (-s[0], -s[1]))
        seen = sorted((s[2] for s in best[:_MAX_KEY_SHOTS]), key=lambda shot: shot.step)
    request = judge.outcome_request(session, seen, key_points, answer=answer)
    run.grade(session, run.ask(session, request, repeat), repeat, control)


def _swapped_answers(sessions: Sequence[Session]) -> dict[str, str]:
    """For each session, the next session's answer (in order, wrapping) that differs from its
    own: the answer-swap control. A session with no differing answer around gets none."""
    out: dict[str, str] = {}
    for i, session in enumerate(sessions):
        own = session.answer or ""
        for other in [*sessions[i + 1 :], *sessions[:i]]:
            if (other.answer or "") != own and other.answer:
                out[session.session_id] = other.answer
                break
    return out


def judge_sessions(
    store: Store,
    caller: ModelCaller,
    judge: Judge,
    selection: Selection,
    *,
    repeat: int = 1,
    controls: bool = False,
    on_session: Callable[[int, int], None] = lambda done, total: None,
) -> Judging:
    """Judge the selected sessions ``repeat`` times (and their controls), appending every call and
    verdict to one new stream.

    Raises:
        OwnloopError: no selected session ended with an outcome.
    """
    began = time.perf_counter()
    picked = fold_selected(store, selection)
    sessions = sorted(
        (s for s in picked.values() if s.outcome is not None and s.status not in UNGRADED),
        key=lambda s: (s.started_at is None, s.started_at, s.session_id),
    )
    if not sessions:
        raise OwnloopError(
            f"none of the {len(picked)} sessions selected ended with an outcome to judge. "
            'List them with: ownloop sql "select session_id, run_id, status from sessions"'
        )
    run = _Run(store, caller, judge)
    swaps = _swapped_answers(sessions) if controls else {}
    for done, session in enumerate(sessions, start=1):
        for r in range(1, repeat + 1):
            _judge_once(run, session, r)
        if controls:
            _judge_once(run, session, 1, control="blank")
            if session.session_id in swaps:
                _judge_once(run, session, 1, control="swapped", answer=swaps[session.session_id])
        on_session(done, len(sessions))
    stream_id = None
    if run.events:
        with store.stream() as stream:
            stream.append(run.events)
            stream_id = stream.stream_id
        store.sync()
    return Judging(
        judge=judge.name,
        version=judge.version,
        selected=len(picked),
        judged=len(sessions),
        repeats=repeat,
        calls=run.calls,
        stream=stream_id,
        seconds=time.perf_counter() - began,
        **run.counts,
    )


class RecordedJudgeCalls:
    """A cassette of recorded judge calls: a request is answered with the recorded answer of the
    same session, repeat and request (in the order recorded), never by a model. A request that
    was not recorded is answered with nothing (the judging counts it ``unanswered``)."""

    def __init__(self, store: Store, judge_model: str = "") -> None:
        self.store = store
        self.model = judge_model
        self._calls: dict[str, list[ModelCalled]] = {}
        self.misses = 0

    def _recorded(self, session_id: str) -> list[ModelCalled]:
        if session_id not in self._calls:
            self._calls[session_id] = [
                e
                for e in self.store.events(session_id)
                if type(e) is ModelCalled and e.step == -1 and e.response is not None
            ]
        return self._calls[session_id]

    def call(self, request: CallRequest) -> CallOutcome:
        wanted = msgspec.json.encode(request.messages)
        context = request.context
        recorded = self._recorded(context.session_id)
        for i, call in enumerate(recorded):
            if call.attempt == context.attempt and msgspec.json.encode(call.messages) == wanted:
                del recorded[i]  # each recorded answer serves one request
                event = msgspec.structs.replace(
                    call, at=now(), call_id=new_id(), latency_ms=0.0, served_by="exact"
                )
                return CallOutcome([event], call.response, call.finish_reason, None)
        self.misses += 1
        return CallOutcome([], None, None, "no recorded judge call for this request")


class JudgeOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What ``ownloop judge`` was asked: which sessions, which judge, answered by whom."""

    judge: str = "final"  # a built-in judge's name, or a judge file
    run_id: str | None = None
    target: str | None = None  # a session id, or a task id (its latest session)
    where: str | None = None
    endpoint: str | None = None  # the judge model's OpenAI-compatible endpoint
    model: str = ""
    api_key: str | None = None
    repeat: int = 1
    controls: bool = False
    replay: bool = False  # answer from the recorded judge calls (a cassette), no endpoint
    report_only: bool = False  # judge nothing: report what was recorded


class JudgeOutcome(NamedTuple):
    judging: Judging | None  # None: only a report was asked for
    report: JudgeReport
    misses: int = 0  # replaying: requests no recorded call answered

    def lines(self) -> list[str]:
        """What ``ownloop judge`` prints."""
        lines = []
        j = self.judging
        if j is not None:
            lines.append(
                f"judged {j.judged} of {j.selected} sessions x{j.repeats} with judge {j.judge} "
                f"(version {j.version}) in {j.seconds:.1f}s: {j.passed} passed, "
                f"{j.failed} failed, {j.unreadable} unreadable, {j.unanswered} not answered; "
                f"{j.controls} control verdicts; {j.calls} calls"
            )
            if self.misses:
                lines.append(f"{self.misses} requests had no recorded judge call (not answered)")
        lines.extend(self.report.lines())
        if j is not None and j.stream:
            lines.append(f'stream: {j.stream}   query: ownloop sql "select * from judge_grades"')
        return lines


def judge(store: Store, options: JudgeOptions) -> JudgeOutcome:
    """``ownloop judge``: judge the selected sessions (or only report), then the judge's report.

    Raises:
        OwnloopError: a bad judge, selection or endpoint (one line with the fix).
    """
    from ownloop.recorder.model import ModelClient
    from ownloop.replay.target import resolve_target

    spec = load_judge(options.judge)
    if options.target is not None:
        selection = Selection(session_ids=(resolve_target(store, options.target, options.run_id),))
    else:
        selection = Selection(run_id=options.run_id, where=options.where)
    judging, misses = None, 0
    if not options.report_only:
        caller: ModelCaller
        with ExitStack() as opened:  # the live client's connections closed after judging
            if options.replay:
                caller = recorded = RecordedJudgeCalls(store)
            else:
                if not options.endpoint or not options.model:
                    raise OwnloopError(
                        "judging needs the judge model: --endpoint URL --model M (or --replay "
                        "to answer from the recorded judge calls, --report to judge nothing)"
                    )
                client = opened.enter_context(
                    ModelClient(
                        options.endpoint,
                        options.model,
                        load_blob=store.get_blob,
                        put_blob=store.put_blob,
                        api_key=options.api_key,
                    )
                )
                client.check()
                caller = client
            judging = judge_sessions(
                store, caller, spec, selection, repeat=options.repeat, controls=options.controls
            )
        misses = recorded.misses if options.replay else 0
    report = judge_report(fold_selected(store, selection).values(), spec.name)
    return JudgeOutcome(judging, report, misses)
