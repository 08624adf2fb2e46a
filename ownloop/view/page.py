"""A session as the viewer and the report show it: one plain value per thing on the page.

Templates only lay these out. Every recorded string stays a plain ``str`` here; the template
engine escapes it (autoescape) when it reaches HTML, so recorded text is never markup.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import NamedTuple

from ownloop.replay.fidelity import RUNGS
from ownloop.replay.fold import Session, Step
from ownloop.replay.render import action_text, element_text, op_text
from ownloop.store import events as E
from ownloop.view.marks import Mark, arrow_head, session_marks

__all__ = [
    "CallView",
    "EvidenceView",
    "MarkView",
    "OpView",
    "SessionPage",
    "ShotView",
    "StepView",
    "build_page",
]

ImageUrl = Callable[[str, str], str]  # (sha256, media type) -> the URL an <img> loads


class MarkView(NamedTuple):
    """A mark with what SVG needs: ``r`` the ring's radius and ``head`` an arrow head's points,
    both in page pixels (the SVG's viewBox is the screenshot's size)."""

    kind: str
    x: float
    y: float
    x2: float | None
    y2: float | None
    label: str
    r: float
    head: str
    label_x: float
    label_y: float


class ShotView(NamedTuple):
    sha256: str
    src: str
    width: int
    height: int
    url: str


class CallView(NamedTuple):
    attempt: int
    purpose: str
    latency_ms: float
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None
    error: str | None
    served_by: str
    response: str | None
    parse_error: str | None


class OpView(NamedTuple):
    idx: int
    action_idx: int
    text: str
    element: str
    ok: bool
    error: str | None
    url_before: str
    url_after: str
    duration_ms: float
    extra: str  # new pages, a dialog, a download


class StepView(NamedTuple):
    number: int
    shot: ShotView | None
    marks: list[MarkView]
    thought: str
    response: str | None
    parse_error: str | None
    parser: str
    actions: list[tuple[str, str]]  # (compact text, as the model wrote it)
    calls: list[CallView]
    ops: list[OpView]
    url_after: str
    latency_ms: float
    prompt_tokens: int
    completion_tokens: int
    summary: str
    failed: bool
    fidelity: list[tuple[str, str]]  # (what, verdict) for a replayed step
    diverged: bool
    rung: str = ""  # a guarded replay's step: its lowest rung (the fidelity view's rung), or ""
    rung_ops: str = ""  # its operations by rung, e.g. "1 exact, 1 retargeted"

    @property
    def rung_class(self) -> str:
        """The CSS class suffix of the rung: one of RUNGS, or "other" for a value it does not
        know (the class attribute never carries recorded text)."""
        return self.rung if self.rung in RUNGS else "other"


class EvidenceView(NamedTuple):
    name: str
    source: str
    media_type: str
    value: str | None  # pretty JSON when inline
    sha256: str | None
    text_url: str | None  # where to read a blob as text
    text: str | None  # a blob's text, embedded (the report)


class SessionPage(NamedTuple):
    session: Session
    steps: list[StepView]
    evidence: list[EvidenceView]
    grades: list[E.SessionGraded]
    parent: SessionPage | None
    pairs: list[tuple[StepView | None, StepView | None]]  # (this, parent) by step number
    rungs: str = ""  # a guarded replay's operations by rung over all its steps, or ""


def _mark_view(mark: Mark, width: int) -> MarkView:
    r = max(8.0, width / 90)
    head = ""
    if mark.x2 is not None and mark.y2 is not None:
        head = " ".join(
            f"{x:.1f},{y:.1f}" for x, y in arrow_head(mark.x, mark.y, mark.x2, mark.y2, r * 1.6)
        )
    label = mark.label
    if len(label) > 80:
        label = label[:77] + "..."
    # Labels sit below and right of the point, pulled back inside the screenshot.
    label_x = min(max(mark.x + r * 1.4, 2.0), max(width - 8.0 * len(label), 2.0))
    label_y = max(mark.y + r * 2.4, r * 2)
    return MarkView(mark.kind, mark.x, mark.y, mark.x2, mark.y2, label, r, head, label_x, label_y)


def _pretty(value_json: str) -> str:
    try:
        return json.dumps(json.loads(value_json), indent=2, ensure_ascii=False)
    except ValueError:
        return value_json


def _fidelity(fidelity: E.FidelityMeasured | None) -> list[tuple[str, str]]:
    if fidelity is None:
        return []
    if fidelity.screenshot_identical:
        shot = "identical"
    elif fidelity.pixel_diff is not None:
        shot = f"differs ({fidelity.pixel_diff:.2%} of pixels)"
    else:
        shot = "differs (other size)"
    element = {True: "same", False: "differs", None: "n/a"}[fidelity.element_equal]
    return [
        ("screenshot", shot),
        ("url", "equal" if fidelity.url_equal else "differs"),
        ("element", element),
        ("verdict", "diverged" if fidelity.diverged else "same"),
    ]


def _rung_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {rung}" for rung, n in counts.items() if n)


def _op_rungs(fidelity: E.FidelityMeasured | None) -> dict[str, int]:
    """A step's operations by rung, as the fidelity view's columns count them."""
    if fidelity is None or not fidelity.rung:
        return {}
    return {
        "exact": fidelity.exact_ops,
        "same_target": fidelity.same_target_ops,
        "retargeted": fidelity.retargeted_ops,
        "diverged": fidelity.diverged_ops,
        "failed": fidelity.failed_ops,
    }


def _calls(step: Step) -> list[CallView]:
    errors = {parse.call_id: parse.error for parse in step.parses if parse.error is not None}
    return [
        CallView(
            c.attempt,
            c.purpose,
            c.latency_ms,
            c.prompt_tokens,
            c.completion_tokens,
            c.finish_reason,
            c.error,
            c.served_by,
            c.response,
            errors.get(c.call_id),
        )
        for c in step.calls
    ]


def _op(effect: E.BrowserActed) -> OpView:
    extra = []
    if effect.pages_opened:
        extra.append(f"opened {effect.pages_opened} page(s)")
    if effect.dialog is not None:
        extra.append(f"dialog {effect.dialog.type}: {effect.dialog.message}")
    if effect.download:
        extra.append(f"downloaded blob {effect.download[:12]}")
    return OpView(
        effect.idx,
        effect.action_idx,
        op_text(effect.op),
        element_text(effect.element),
        effect.ok,
        effect.error,
        effect.url_before,
        effect.url_after,
        effect.duration_ms,
        "; ".join(extra),
    )


def _step_view(step: Step, marks: list[Mark], image_url: ImageUrl) -> StepView:
    shot = None
    if step.screenshot is not None:
        s = step.screenshot
        shot = ShotView(
            s.sha256, image_url(s.sha256, s.media_type), s.width or 1280, s.height or 800, s.url
        )
    width = shot.width if shot is not None else 1280
    actions = [(action_text(a), a.raw) for a in step.actions]
    ops = [_op(e) for e in step.effects]
    parse_error = step.parsed.error if step.parsed is not None else None
    failed = bool(parse_error) or any(not o.ok for o in ops) or any(c.error for c in step.calls)
    summary = (
        actions[0][0]
        if actions
        else (f"parse error: {parse_error}" if parse_error else ops[0].text if ops else "no action")
    )
    if len(actions) > 1:
        summary += f" +{len(actions) - 1}"
    return StepView(
        number=step.step,
        shot=shot,
        marks=[_mark_view(m, width) for m in marks],
        thought=step.thought,
        response=_response(step),
        parse_error=parse_error,
        parser=step.parsed.parser if step.parsed is not None else "",
        actions=actions,
        calls=_calls(step),
        ops=ops,
        url_after=next((o.url_after for o in reversed(ops) if o.url_after), ""),
        latency_ms=sum(c.latency_ms for c in step.calls),
        prompt_tokens=sum(c.prompt_tokens or 0 for c in step.calls),
        completion_tokens=sum(c.completion_tokens or 0 for c in step.calls),
        summary=summary,
        failed=failed,
        fidelity=_fidelity(step.fidelity),
        diverged=step.fidelity is not None and step.fidelity.diverged,
        rung=step.fidelity.rung if step.fidelity is not None else "",
        rung_ops=_rung_counts(_op_rungs(step.fidelity)),
    )


def _response(step: Step) -> str | None:
    # The response that was parsed last, as the steps view shows it.
    if step.parsed is not None:
        for call in step.calls:
            if call.call_id == step.parsed.call_id:
                return call.response
    return step.response


def _evidence(
    item: E.EvidenceCaptured,
    text_url: Callable[[str], str] | None,
    blob_text: Callable[[str], str | None] | None,
) -> EvidenceView:
    value = _pretty(item.value_json) if item.value_json is not None else None
    url = text_url(item.sha256) if item.sha256 and text_url is not None else None
    text = blob_text(item.sha256) if item.sha256 and blob_text is not None else None
    return EvidenceView(item.name, item.source, item.media_type, value, item.sha256, url, text)


def build_page(
    session: Session,
    image_url: ImageUrl,
    *,
    parent: Session | None = None,
    text_url: Callable[[str], str] | None = None,
    blob_text: Callable[[str], str | None] | None = None,
) -> SessionPage:
    """The page of one session, and of its parent beside it when it is a replay.

    Args:
        session: the folded session.
        image_url: the ``src`` of a screenshot, from its sha256 and media type.
        parent: the session it replays, shown step by step beside it.
        text_url: where a blob of evidence (a DOM snapshot) can be read as text (the viewer).
        blob_text: a blob of evidence as text, to embed it (the report); None to leave it out.
    """
    marks = session_marks(session)
    steps = [_step_view(step, marks[step.step], image_url) for step in session.steps]
    evidence = [_evidence(item, text_url, blob_text) for item in session.evidence]
    parent_page = (
        build_page(parent, image_url, text_url=text_url, blob_text=blob_text)
        if parent is not None
        else None
    )
    pairs: list[tuple[StepView | None, StepView | None]] = []
    if parent_page is not None:
        mine = {s.number: s for s in steps}
        theirs = {s.number: s for s in parent_page.steps}
        pairs = [(mine.get(n), theirs.get(n)) for n in sorted(mine.keys() | theirs.keys())]
    totals = {rung: 0 for rung in RUNGS}
    for step in session.steps:
        for rung, n in _op_rungs(step.fidelity).items():
            totals[rung] += n
    return SessionPage(
        session, steps, evidence, list(session.grades), parent_page, pairs, _rung_counts(totals)
    )
