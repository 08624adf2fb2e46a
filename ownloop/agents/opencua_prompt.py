"""OpenCUA's prompt texts: read from the user's OSWorld clone, or ownloop's own built-in ones.

OSWorld keeps them in ``mm_agents/opencua/prompts.py``: ``SYSTEM_PROMPT_V1_L1/L2/L3`` (the "old"
system prompts OpenCUA-7B and 32B were trained with; L2 is defined twice there and the second,
OSWorld-Verified, definition wins), ``INSTRUTION_TEMPLATE`` (sic) for the user turn,
``STEP_TEMPLATE`` and ``ACTION_HISTORY_TEMPLATE`` for the history. The file is read, never run
(``released.py``). The built-in texts below were written for ownloop: they state the same
response layout, action space and coordinate convention, not the released wording. The history
templates are pure layout (a heading and the action sentence) and keep the released layout, which
the model was trained on.
"""

from __future__ import annotations

from typing import NamedTuple

from ownloop.agents.released import Released, ReleasedSpec

__all__ = [
    "BUILTIN",
    "CANDIDATES",
    "COT_LEVELS",
    "RELEASED_SPEC",
    "PromptTexts",
    "prompt_texts",
]

CANDIDATES = ("mm_agents/opencua/prompts.py", "opencua/prompts.py")
COT_LEVELS = ("l1", "l2", "l3")
_TEMPLATES = ("INSTRUTION_TEMPLATE", "STEP_TEMPLATE", "ACTION_HISTORY_TEMPLATE")
RELEASED_SPEC = ReleasedSpec(
    "xlang-ai/OSWorld",
    CANDIDATES,
    tuple(f"SYSTEM_PROMPT_V1_{level.upper()}" for level in COT_LEVELS) + _TEMPLATES,
)
"""Where the texts live in a clone of OSWorld: the module must define every level's prompt."""


class PromptTexts(NamedTuple):
    system: str  # no placeholders (the released ones hold JSON braces and are never formatted)
    instruction: str  # "{instruction}"
    step: str  # "{step_num}"
    history: str  # "{action}" (also given "{observation}" and "{thought}", as OSWorld does)
    source: str  # "released:/path/prompts.py" or "built-in"


_OPENING = (
    "You operate a computer through its graphical interface. Each turn you receive the task, "
    "what you did so far and a screenshot of the screen as it is now; you answer with the next "
    "step, which is carried out with pyautogui."
)
_OBSERVATION = (
    "Observation:\n"
    "  Say what the screenshot shows that matters for the task: the application and page, the "
    "controls, fields and messages in view, and anything still loading."
)
_THOUGHT = (
    "Thought:\n"
    "  Judge what the steps so far achieved and whether the last one worked; if it did not, "
    "plan how to recover. Weigh the possible next steps and pick one, saying what you expect it "
    "to do. For typing, note where the cursor is and the text the field should end up with. "
    "Think in the first person."
)
_ACTION = (
    "Action:\n"
    "  One short sentence naming the step: the element by its label (or by its look and place "
    "when it has none), never by coordinates; for keys, the keys and how many presses; for "
    "typing, the text."
)
_CODE = (
    "Then give the step as code in a ```python block: pyautogui calls such as "
    "pyautogui.click(x=..., y=...), pyautogui.doubleClick, pyautogui.rightClick, "
    "pyautogui.moveTo, pyautogui.dragTo, pyautogui.scroll(clicks), pyautogui.write(message=...), "
    "pyautogui.press(...) and pyautogui.hotkey(...). Coordinates are pixels of the screenshot "
    "as you see it, from its top-left corner. Two more functions exist:\n"
    '- {"name": "computer.triple_click", "description": "Triple-click at a point", '
    '"parameters": {"type": "object", "properties": {"x": {"type": "number", "description": '
    '"x of the point"}, "y": {"type": "number", "description": "y of the point"}}, '
    '"required": ["x", "y"]}}\n'
    '- {"name": "computer.terminate", "description": "End the task and report whether it was '
    'done", "parameters": {"type": "object", "properties": {"status": {"type": "string", '
    '"enum": ["success", "failure"], "description": "whether the task was done"}}, '
    '"required": ["status"]}}\n'
    "When the task cannot be done, answer computer.terminate(status='failure')."
)


def _system(*sections: str) -> str:
    layout = "\n\n".join(sections)
    return (
        f"{_OPENING}\n\nAnswer every step with these sections, each under a '## ' heading:"
        f"\n\n{layout}\n\n{_CODE}"
    )


BUILTIN: dict[str, PromptTexts] = {
    level: PromptTexts(
        system=_system(*sections),
        instruction="# Task Instruction:\n{instruction}\n\nDecide the next step from the "
        "screenshot, the task and the steps taken so far, if any.\n",
        step="# Step {step_num}:\n",
        history="## Action:\n{action}\n",
        source="built-in",
    )
    for level, sections in {
        "l1": (_ACTION,),
        "l2": (_THOUGHT, _ACTION),
        "l3": (_OBSERVATION, _THOUGHT, _ACTION),
    }.items()
}
"""The built-in texts per chain-of-thought level."""


def prompt_texts(cot: str, released: Released | None) -> PromptTexts:
    """The texts for chain-of-thought level ``cot`` from a clone's constants (``RELEASED_SPEC``),
    or the built-in ones when there are none or the clone lacks one of them."""
    if released is None:
        return BUILTIN[cot]
    system_name = f"SYSTEM_PROMPT_V1_{cot.upper()}"
    texts = released.constants
    if any(name not in texts for name in (system_name, *_TEMPLATES)):
        return BUILTIN[cot]
    return PromptTexts(
        system=texts[system_name],
        instruction=texts["INSTRUTION_TEMPLATE"],
        step=texts["STEP_TEMPLATE"],
        history=texts["ACTION_HISTORY_TEMPLATE"],
        source=released.source,
    )
