"""How a competent model would solve a MiniWoB task, planned from the page's initial state.

Pure functions: the expert reads a ``PageFacts`` from its own page (the query text and every
interactive element with its box in CSS pixels) and ``plan_episode`` turns it into steps of
agent-neutral actions; the last step finishes the episode.

Any other web page is planned from its task's own words (``read_instructions``): a task that
spells out its steps as ``type "TEXT" into "LABEL"`` and ``click "NAME"`` (e.g. a test site's
sign-in) is done one instruction at a time, ``plan_instruction`` finding each named field or
button in the page as it is then.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from ownloop.errors import OwnloopError
from ownloop.store.events import Action, Click, Finish, TypeText

__all__ = [
    "PLANNED_TASKS",
    "Instruction",
    "PageFacts",
    "Plan",
    "Step",
    "UnplannableTask",
    "Widget",
    "finish_step",
    "plan_episode",
    "plan_instruction",
    "read_instructions",
]


class UnplannableTask(OwnloopError):
    pass


class Widget(msgspec.Struct, frozen=True, kw_only=True):
    """An element of the task page: what it is, what it says, where it is (CSS px)."""

    tag: str
    id: str = ""
    type: str = ""
    cls: str = ""
    text: str = ""
    title: str = ""
    href: str = ""
    label: str = ""  # a field's label (its <label>, else aria-label, else placeholder)
    box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # x, y, width, height
    visible: bool = True

    @property
    def centre(self) -> tuple[float, float]:
        x, y, w, h = self.box
        return round(x + w / 2, 1), round(y + h / 2, 1)


class PageFacts(msgspec.Struct, frozen=True, kw_only=True):
    task: str  # the MiniWoB task name, e.g. "click-button"
    query: str  # the instruction the page shows
    widgets: tuple[Widget, ...] = ()


class Step(msgspec.Struct, frozen=True, kw_only=True):
    """One model response: a thought and its actions (page CSS px)."""

    thought: str
    actions: tuple[Action, ...]


class Plan(NamedTuple):
    """A planned episode and the reward its rehearsal in the expert's own page earned."""

    task: str
    seed: int | None
    viewport: tuple[int, int]
    steps: tuple[Step, ...]
    reward: float | None
    widgets: tuple[Widget, ...] = ()  # the page's elements (wrong clicks go there, with noise)


def _click(widget: Widget, thought: str) -> Step:
    x, y = widget.centre
    return Step(thought=thought, actions=(Click(x=x, y=y),))


def _type(text: str, thought: str) -> Step:
    return Step(thought=thought, actions=(TypeText(text=text),))


def _finish(answer: str) -> Step:
    return Step(thought="The task is complete.", actions=(Finish(answer=answer),))


def _quoted(query: str) -> list[str]:
    return re.findall(r'"([^"]*)"', query)


def _find(facts: PageFacts, test: Callable[[Widget], bool], what: str) -> Widget:
    for widget in facts.widgets:
        if widget.visible and test(widget):
            return widget
    raise UnplannableTask(f"{facts.task}: no visible {what} on the page (query: {facts.query!r})")


def _by_id(facts: PageFacts, element_id: str) -> Widget:
    return _find(facts, lambda w: w.id == element_id, f"#{element_id}")


def _first_quote(facts: PageFacts) -> str:
    quoted = _quoted(facts.query)
    if not quoted:
        raise UnplannableTask(f"{facts.task}: no quoted text in the query {facts.query!r}")
    return quoted[0]


# ------------------------------------------------------------------ one planner per task


def _click_button(facts: PageFacts) -> list[Step]:
    label = _first_quote(facts)
    button = _find(facts, lambda w: w.tag == "button" and w.text == label, f'"{label}" button')
    return [_click(button, f'I need to click the "{label}" button.'), _finish(label)]


def _click_link(facts: PageFacts) -> list[Step]:
    label = _first_quote(facts)
    link = _find(facts, lambda w: "alink" in w.cls.split() and w.text == label, f'link "{label}"')
    return [_click(link, f'The link "{label}" is in the text; I will click it.'), _finish(label)]


def _enter_text(facts: PageFacts) -> list[Step]:
    text = _first_quote(facts)
    return [
        _click(_by_id(facts, "tt"), "First I click into the text field."),
        _type(text, f'Now I type "{text}".'),
        _click(_by_id(facts, "subbtn"), "Then I press Submit."),
        _finish(text),
    ]


def _focus_text(facts: PageFacts) -> list[Step]:
    return [_click(_by_id(facts, "tt"), "I click into the textbox to focus it."), _finish("")]


def _labelled(facts: PageFacts, name: str, input_type: str) -> Widget:
    return _find(
        facts,
        lambda w: w.tag == "label" and w.type == input_type and w.text == name,
        f'{input_type} "{name}"',
    )


def _click_checkboxes(facts: PageFacts) -> list[Step]:
    match = re.match(r"Select (.*) and click Submit\.", facts.query)
    if match is None:
        raise UnplannableTask(f"{facts.task}: cannot read the query {facts.query!r}")
    names = [] if match[1] == "nothing" else match[1].split(", ")
    steps = [
        _click(_labelled(facts, name, "checkbox"), f'I tick the checkbox "{name}".')
        for name in names
    ]
    steps.append(_click(_by_id(facts, "subbtn"), "All the right boxes are ticked; Submit."))
    return [*steps, _finish(", ".join(names))]


def _click_option(facts: PageFacts) -> list[Step]:
    match = re.match(r"Select (.*) and click Submit\.", facts.query)
    if match is None:
        raise UnplannableTask(f"{facts.task}: cannot read the query {facts.query!r}")
    return [
        _click(_labelled(facts, match[1], "radio"), f'I select the option "{match[1]}".'),
        _click(_by_id(facts, "subbtn"), "Now I click Submit."),
        _finish(match[1]),
    ]


def _login_user(facts: PageFacts) -> list[Step]:
    quoted = _quoted(facts.query)
    if len(quoted) < 2:
        raise UnplannableTask(f"{facts.task}: cannot read the query {facts.query!r}")
    user, password = quoted[0], quoted[1]
    return [
        _click(_by_id(facts, "username"), "I click the username field."),
        _type(user, f'I type the username "{user}".'),
        _click(_by_id(facts, "password"), "Now the password field."),
        _type(password, "I type the password."),
        _click(_by_id(facts, "subbtn"), "Both fields are filled; I press Login."),
        _finish(user),
    ]


def _enter_password(facts: PageFacts) -> list[Step]:
    password = _first_quote(facts)
    return [
        _click(_by_id(facts, "password"), "I click the first password field."),
        _type(password, "I type the password."),
        _click(_by_id(facts, "verify"), "Now the verification field."),
        _type(password, "I type the password again."),
        _click(_by_id(facts, "subbtn"), "I press Submit."),
        _finish(""),
    ]


def _click_dialog(facts: PageFacts) -> list[Step]:
    close = _find(
        facts,
        lambda w: w.tag == "button" and "ui-dialog-titlebar-close" in w.cls.split(),
        'dialog "x" button',
    )
    return [_click(close, 'I close the dialog with its "x" button.'), _finish("")]


def _click_tab(facts: PageFacts) -> list[Step]:
    match = re.search(r"Tab #(\d+)", facts.query)
    if match is None:
        raise UnplannableTask(f"{facts.task}: cannot read the query {facts.query!r}")
    label = f"Tab #{match[1]}"
    tab = _find(facts, lambda w: w.tag == "a" and w.text == label, f'tab "{label}"')
    return [_click(tab, f"I click on {label}."), _finish(label)]


_PLANNERS: dict[str, Callable[[PageFacts], list[Step]]] = {
    "click-button": _click_button,
    "click-link": _click_link,
    "enter-text": _enter_text,
    "focus-text": _focus_text,
    "click-checkboxes": _click_checkboxes,
    "login-user": _login_user,
    "click-dialog": _click_dialog,
    "click-tab": _click_tab,
    "enter-password": _enter_password,
    "click-option": _click_option,
}

PLANNED_TASKS = tuple(_PLANNERS)
"""The MiniWoB task types the expert can solve."""


def plan_episode(facts: PageFacts) -> tuple[Step, ...]:
    """The whole episode, step by step, from the initial page; the last step finishes it.

    Raises:
        UnplannableTask: the task type is unknown, or its page is not as expected.
    """
    planner = _PLANNERS.get(facts.task)
    if planner is None:
        raise UnplannableTask(
            f"the miniwob expert cannot do {facts.task!r}; it knows: {', '.join(PLANNED_TASKS)}"
        )
    return tuple(planner(facts))


# ------------------------------------------------------------------ a task that says its steps


class Instruction(msgspec.Struct, frozen=True, kw_only=True):
    """One step a task spells out: type ``text`` into the field labelled ``name``, or click the
    button or link called ``name``."""

    kind: str  # "type" or "click"
    name: str
    text: str = ""


INSTRUCTION_FORMS = 'type "TEXT" into "LABEL", click "NAME"'
"""The instructions ``read_instructions`` reads, as an error message names them."""

_INSTRUCTION = re.compile(
    r'\b(?:type "(?P<text>[^"]*)" into "(?P<field>[^"]*)"|click "(?P<name>[^"]*)")',
    re.IGNORECASE,
)


def read_instructions(prompt: str) -> tuple[Instruction, ...]:
    """The steps a task's prompt spells out, in order, e.g. ``Sign in: type "demo" into "User",
    type "demo" into "Password", then click "Sign in".``

    Raises:
        UnplannableTask: the prompt spells out no step.
    """
    found = tuple(
        Instruction(kind="type", name=m["field"], text=m["text"])
        if m["field"] is not None
        else Instruction(kind="click", name=m["name"])
        for m in _INSTRUCTION.finditer(prompt)
    )
    if not found:
        raise UnplannableTask(
            f"the task {prompt!r} spells out no step the expert reads ({INSTRUCTION_FORMS})"
        )
    return found


def _clickable(widget: Widget, name: str) -> bool:
    return widget.tag in ("button", "a", "input") and name in (widget.text, widget.title)


def plan_instruction(facts: PageFacts, instruction: Instruction) -> list[Step]:
    """The steps of one instruction on the page as ``facts`` shows it: a click into the field
    then the typing, or one click.

    Raises:
        UnplannableTask: the page has no visible field or button of that name.
    """
    name = instruction.name
    if instruction.kind == "click":
        target = _find(facts, lambda w: _clickable(w, name), f'button or link "{name}"')
        return [_click(target, f'I click "{name}".')]
    field = _find(
        facts,
        lambda w: w.tag in ("input", "textarea") and w.label == name,
        f'field labelled "{name}"',
    )
    return [
        _click(field, f'I click into the "{name}" field.'),
        _type(instruction.text, f'I type "{instruction.text}" into "{name}".'),
    ]


def finish_step(answer: str = "") -> Step:
    """The last step of an episode: it is done."""
    return _finish(answer)
