"""The system and instruction texts of the ``qwen3vl`` agent.

The request's shape follows OSWorld's released ``Qwen3VLAgent`` (a "# Tools" section holding one
``computer_use`` function as JSON, the ``<tool_call>`` format, a response-format section; then
"Instruction: ..." and "Previous actions: ..." in the user turn). Its prose is ownloop's own
wording of the same action space: that agent builds its texts inside ``predict()``, so there is
no constant to read from a clone. EvoCUA's S2 prompt is read from a clone of OSWorld
(``mm_agents/evocua/prompts.py``: ``S2_SYSTEM_PROMPT``, ``S2_DESCRIPTION_PROMPT_TEMPLATE``,
``S2_ACTION_DESCRIPTION_BASE``) when ``--released`` names one; nothing of it is copied here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ownloop.agents.released import Released, ReleasedSpec

__all__ = ["ACTIONS", "EVOCUA_ACTIONS", "EVOCUA_SPEC", "instruction_text", "system_text"]

EVOCUA_SPEC = ReleasedSpec(
    "xlang-ai/OSWorld",
    candidates=("mm_agents/evocua/prompts.py",),
    names=("S2_SYSTEM_PROMPT", "S2_DESCRIPTION_PROMPT_TEMPLATE", "S2_ACTION_DESCRIPTION_BASE"),
)

ACTIONS = (
    "key",
    "type",
    "mouse_move",
    "left_click",
    "left_click_drag",
    "right_click",
    "middle_click",
    "double_click",
    "triple_click",
    "scroll",
    "hscroll",
    "wait",
    "terminate",
    "answer",
)
EVOCUA_ACTIONS = (*ACTIONS[:11], "wait", "terminate", "key_down", "key_up")

_MEANINGS = {
    "key": "hold the given keys down in order, then let them go in reverse order",
    "type": "type the text with the keyboard",
    "mouse_move": "move the pointer to the (x, y) point",
    "left_click": "left-click at the (x, y) point",
    "left_click_drag": "press the left button at the pointer and drag it to the (x, y) point",
    "right_click": "right-click at the (x, y) point",
    "middle_click": "middle-click at the (x, y) point",
    "double_click": "double-click at the (x, y) point",
    "triple_click": "triple-click at the (x, y) point",
    "scroll": "turn the mouse wheel by pixels notches (positive: up, negative: down)",
    "hscroll": "turn the wheel sideways by pixels notches (positive: right)",
    "wait": "wait the given seconds for the screen to change",
    "terminate": "end the task, saying whether it succeeded",
    "answer": "give the answer to a question",
    "key_down": "press the given keys and keep them held",
    "key_up": "let the given keys go, in reverse order",
}

_DESCRIPTION = (
    "Operate the computer with its mouse and keyboard; each step shows you a screenshot.\n"
    "* Programs may need time to respond: wait, then look at the next screenshot.\n"
    "* {resolution}\n"
    "* Find the element on the screenshot before you point at it, and aim at its centre."
)

_SYSTEM = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    "{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{{"name": <function-name>, '
    '"arguments": <args-json-object>}}\n</tool_call>\n\n'
    "# Response format\n\nAnswer every step with one line 'Action: <what you do, in a short "
    "sentence>' and then the <tool_call> block. To finish, call terminate."
)


def _tool(description: str, actions: Sequence[str], action_text: str) -> dict[str, object]:
    return {
        "type": "function",
        "function": {
            "name_for_human": "computer_use",
            "name": "computer_use",
            "description": description,
            "parameters": {
                "properties": {
                    "action": {"description": action_text, "enum": list(actions), "type": "string"},
                    "keys": {"description": "Only for action=key.", "type": "array"},
                    "text": {"description": "Only for action=type and answer.", "type": "string"},
                    "coordinate": {"description": "The (x, y) point.", "type": "array"},
                    "pixels": {"description": "Wheel notches to scroll.", "type": "number"},
                    "time": {"description": "Seconds to wait.", "type": "number"},
                    "status": {
                        "description": "Whether the task succeeded.",
                        "type": "string",
                        "enum": ["success", "failure"],
                    },
                },
                "required": ["action"],
                "type": "object",
            },
            "args_format": "Format the arguments as a JSON object.",
        },
    }


def system_text(prompt: str, screen: tuple[int, int], released: Released | None) -> str:
    """The system message for a screen stated as ``screen`` (1000x1000 in relative mode).

    ``prompt`` is "qwen3vl" or "evocua"; ``released`` holds EvoCUA's constants from a clone.
    """
    resolution = f"The screen's resolution is {screen[0]}x{screen[1]}."
    actions = EVOCUA_ACTIONS if prompt == "evocua" else ACTIONS
    action_text = "\n" + "".join(f"* `{name}`: {_MEANINGS[name]}.\n" for name in actions)
    if prompt == "evocua" and released is not None:
        texts = released.constants
        description = texts["S2_DESCRIPTION_PROMPT_TEMPLATE"].replace(
            "{resolution_info}", f"* {resolution}"
        )
        tool = _tool(description, actions, texts["S2_ACTION_DESCRIPTION_BASE"])
        return (
            texts["S2_SYSTEM_PROMPT"]
            .replace("{tools_xml}", json.dumps(tool))
            .replace("{{", "{")
            .replace("}}", "}")
        )
    tool = _tool(_DESCRIPTION.format(resolution=resolution), actions, action_text)
    return _SYSTEM.format(tools=json.dumps(tool))


def instruction_text(task: str, earlier: Sequence[str]) -> str:
    """The user turn's text: the task, then the summaries of the steps before the window."""
    previous = "\n".join(earlier) if earlier else "None"
    return (
        "\nChoose the next move from the screenshot, the instruction and the actions so far."
        f"\n\nInstruction: {task}\n\nPrevious actions:\n{previous}"
    )
