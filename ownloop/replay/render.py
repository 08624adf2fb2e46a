"""A rebuilt session, step by step, for a terminal: what the agent saw, thought and did.

Every piece of recorded text (thoughts, answers, URLs, element names, ids, errors) is data: it
goes into ``rich.text.Text`` (never parsed as markup), with control characters and bidirectional
overrides written as visible escapes (``ownloop.store.text.visible``), so a model or page cannot
restyle or rewrite the terminal.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import msgspec
from rich.console import Group
from rich.text import Text

from ownloop.replay.fold import Session, Step
from ownloop.store.events import Action, BrowserActed, Element, Op
from ownloop.store.text import visible

__all__ = ["action_text", "actions_text", "element_text", "op_text", "plain", "session_view"]

_HIDDEN = frozenset({"raw", "model_x", "model_y", "model_x2", "model_y2"})


def plain(text: str, limit: int | None = None) -> str:
    """``text`` with every control character shown as an escape, shortened to ``limit``."""
    return visible(text, limit)


def _value(value: object) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{round(value, 3)!r}"
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, tuple):
        return "(" + ", ".join(_value(v) for v in value) + ")"
    return repr(value)


@functools.cache
def _fields(kind: type[msgspec.Struct]) -> tuple[msgspec.structs.FieldInfo, ...]:
    return msgspec.structs.fields(kind)  # slow: it evaluates the annotations each time


def _call(name: str, struct: msgspec.Struct) -> str:
    parts = []
    for field in _fields(type(struct)):
        if field.name in _HIDDEN:
            continue
        value = getattr(struct, field.name)
        if field.default is not msgspec.NODEFAULT and value == field.default:
            continue
        parts.append(f"{field.name}={_value(value)}")
    return f"{name}({', '.join(parts)})"


def action_text(action: Action) -> str:
    """One action, compactly: ``click(x=640, y=400)``; fields at their default are left out."""
    return _call(str(type(action).__struct_config__.tag), action)


def actions_text(actions: Sequence[Action]) -> str:
    """Several actions on one line, ``; ``-separated; ``-`` for none."""
    return "; ".join(action_text(a) for a in actions) or "-"


def op_text(op: Op) -> str:
    """One browser operation, compactly: ``mouse.wheel(dy=500)``."""
    return _call(str(type(op).__struct_config__.tag), op)


def element_text(element: Element | None) -> str:
    """What was under the pointer: ``button#subbtn "Submit" [role=button]``, or ""."""
    if element is None:
        return ""
    text = element.tag or "?"
    if element.id:
        text += f"#{element.id}"
    if element.name:
        text += f" {plain(element.name, 60)!r}"
    if element.role:
        text += f" [role={element.role}]"
    if element.frame:
        text += f" in {element.frame}"
    return plain(text)


def _line(indent: int, *parts: tuple[str, str] | str) -> Text:
    return Text.assemble(" " * indent, *parts)


def _header(session: Session) -> list[Text]:
    lines = [
        _line(
            0,
            ("Session ", "bold"),
            (plain(session.session_id), "bold cyan"),
            f"  task {plain(session.task_id or '?')}  run {plain(session.run_id)}  "
            f"{plain(session.agent or '?')}/{plain(session.model or '?')}  "
            f"attempt {session.attempt}",
        )
    ]
    if session.task is not None:
        lines.append(_line(2, ("Task: ", "bold"), plain(session.task.prompt)))
        lines.append(_line(2, ("Start: ", "bold"), plain(session.task.start_url)))
    if session.parent_session_id is not None:
        fork = f" forked at step {session.fork_step}" if session.fork_step is not None else ""
        lines.append(
            _line(
                2,
                ("Replay ", "bold"),
                f"{plain(session.replay_mode or '?')} of {plain(session.parent_session_id)}{fork}",
            )
        )
    return lines


def _effect_line(effect: BrowserActed) -> Text:
    text = _line(6, f"op {effect.idx}: ", op_text(effect.op))
    element = element_text(effect.element)
    if element:
        text.append(f"  on {element}", "magenta")
    if effect.ok:
        text.append("  ok", "green")
    else:
        text.append(f"  ERROR {plain(effect.error or '', 300)}", "bold red")
    if effect.duration_ms:
        text.append(f"  {effect.duration_ms:.0f} ms", "dim")
    if effect.url_after and effect.url_after != effect.url_before:
        text.append(f"  → {plain(effect.url_after)}", "blue")
    if effect.pages_opened:
        text.append(f"  (+{effect.pages_opened} page)", "yellow")
    if effect.dialog is not None:
        text.append(
            f"  dialog {plain(effect.dialog.type)} {plain(repr(effect.dialog.message), 80)}"
        )
    return text


def _step_lines(step: Step) -> list[Text]:
    shot = step.screenshot
    head = _line(0, (f"Step {step.step}", "bold yellow"))
    if shot is not None:
        head.append(f"  {plain(shot.url)}", "blue")
        head.append(f"  screenshot {shot.sha256[:12]} {shot.width}x{shot.height}", "dim")
    lines = [head]
    parse_of = {parse.call_id: parse for parse in step.parses}
    for call in step.calls:
        text = _line(
            2, f"call {call.attempt} ({plain(call.purpose)})", (f" {call.latency_ms:.0f} ms", "dim")
        )
        if call.served_by:
            text.append(f"  served by {plain(call.served_by)}", "dim")
        if call.error:
            text.append(f"  ERROR {plain(call.error, 300)}", "bold red")
        parse = parse_of.get(call.call_id)
        if parse is not None and parse.error is not None:
            text.append(f"  parse error: {plain(parse.error, 300)}", "red")
            if call.response is not None:
                lines.append(text)
                text = _line(4, "response: ", (plain(repr(call.response), 300), "dim"))
        lines.append(text)
    if step.thought:
        first, *rest = plain(step.thought).splitlines() or [""]
        lines.append(_line(2, ("Thought: ", "bold"), (first, "italic")))
        lines.extend(_line(11, (more, "italic")) for more in rest)
    by_action: dict[int, list[BrowserActed]] = {}
    for effect in step.effects:
        by_action.setdefault(effect.action_idx, []).append(effect)
    for index, action in enumerate(step.actions):
        lines.append(_line(4, (f"action {index}: ", "bold"), (action_text(action), "cyan")))
        lines.extend(_effect_line(effect) for effect in by_action.pop(index, []))
    for effects in by_action.values():  # operations without a parse (e.g. replayed ops)
        lines.extend(_effect_line(effect) for effect in effects)
    if step.fidelity is not None:
        f = step.fidelity
        shot_word = (
            "identical"
            if f.screenshot_identical
            else (f"differs ({f.pixel_diff:.2%} pixels)" if f.pixel_diff is not None else "differs")
        )
        text = _line(
            2,
            ("Fidelity: ", "bold"),
            f"screenshot {shot_word}, url "
            f"{'equal' if f.url_equal else 'differs'}, element "
            f"{ {True: 'same', False: 'differs', None: 'n/a'}[f.element_equal] }",
        )
        if f.diverged:
            text.append("  DIVERGED", "bold red")
        lines.append(text)
    return lines


def _footer(session: Session) -> list[Text]:
    end = session.outcome
    if end is None:
        lines = [_line(0, ("Outcome: ", "bold"), ("unfinished (no SessionEnded)", "yellow"))]
    else:
        style = "green" if end.status == "finished" else "red"
        text = _line(0, ("Outcome: ", "bold"), (plain(end.status), f"bold {style}"))
        if end.agent_status and end.agent_status != end.status:
            text.append(f" ({plain(end.agent_status)})")
        if end.answer is not None:
            text.append(f"  answer {plain(repr(end.answer), 200)}")
        text.append(
            f"  {end.steps} steps  {end.seconds:.1f} s  {end.parse_failures} parse "
            f"failures  {end.action_errors} action errors"
        )
        lines = [text]
        if end.error:
            lines.append(_line(2, ("error: ", "bold red"), plain(end.error, 500)))
    for item in session.evidence:
        value = item.value_json if item.value_json is not None else f"blob {item.sha256}"
        lines.append(_line(2, f"evidence {plain(item.name)}: ", plain(value or "", 120)))
    if not session.grades:
        lines.append(_line(0, ("Grades: ", "bold"), "none"))
    else:
        lines.append(_line(0, ("Grades:", "bold")))
        for number, grade in enumerate(session.grades, 1):
            verdict = ("pass", "green") if grade.passed else ("fail", "red")
            text = _line(2, verdict, f" {grade.score:.2f}  {plain(grade.grader, 80)}")
            if grade.grader_version:
                text.append(f" v{plain(grade.grader_version)}")
            text.append(f"  ({plain(grade.source)})", "dim")
            if grade.details:
                text.append(f"  {plain(grade.details, 200)}")
            if number == len(session.grades):
                text.append("  latest", "bold")
            lines.append(text)
    return lines


def session_view(session: Session) -> Group:
    """The whole session for ``rich``: header, each step, then outcome, evidence and grades."""
    lines = _header(session)
    for step in session.steps:
        lines.extend(_step_lines(step))
    lines.extend(_footer(session))
    return Group(*lines)
