"""Fara-7B's system message: the function-calling template and its one tool, ``computer_use``.

The released harness (microsoft/fara) builds the system message each turn as
``"You are a helpful assistant." + "\\n\\n" + FN_CALL_TEMPLATE.format(tool_descs=<tool JSON>)``,
where the tool's description states the screen size in the model's space (1428x896 for a
1440x900 page). ``FN_CALL_TEMPLATE`` is a string constant of ``qwen_helpers/fncall_prompt.py``
and is read from the user's clone when there is one (``released.py``; the file is read, never
run). The tool JSON is not a constant upstream (its description is assembled in code), so it is
always built here from the schema facts: the same name, actions, argument names, types and enum
values, with descriptions written for this project. Without a clone, a template written for this
project states the same grammar.
"""

from __future__ import annotations

import json
from typing import Any

from ownloop.agents.released import Released, find_released

__all__ = [
    "ACTIONS",
    "BUILTIN_TEMPLATE",
    "CANDIDATES",
    "SYSTEM_PREFIX",
    "TEMPLATE_NAME",
    "load_template",
    "system_text",
    "tool_schema",
]

SYSTEM_PREFIX = "You are a helpful assistant."
TEMPLATE_NAME = "FN_CALL_TEMPLATE"
CANDIDATES = (
    "src/fara/qwen_helpers/fncall_prompt.py",
    "fara/qwen_helpers/fncall_prompt.py",
    "qwen_helpers/fncall_prompt.py",
)
"""Where the template lives in a clone of microsoft/fara (or of its package folder)."""

ACTIONS = (
    "key",
    "type",
    "mouse_move",
    "left_click",
    "scroll",
    "visit_url",
    "web_search",
    "history_back",
    "pause_and_memorize_fact",
    "wait",
    "terminate",
)
"""The action enum the tool advertises (the released schema with its input-text arguments)."""

BUILTIN_TEMPLATE = """\
You operate a web browser for a user, one tool call at a time, to get their request done.
* Stop before any step that would commit the user to something or speak for them: paying, \
ordering, booking, signing up, sending a message or an email, placing a call, or entering \
their personal details. Go as far as you can without crossing that line (find the item, fill \
the cart, find the phone number), then finish.
* Questions that only need an answer involve no such step; answer them in your final message.

The tool you can call is described inside <tools></tools>:
<tools>
{tool_descs}
</tools>

Write your reasoning first, then the call as a JSON object with the function's name and its \
arguments, between <tool_call></tool_call> tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""
"""ownloop's own wording of the same template: the grammar and the braces are the same."""


def _description(width: int, height: int) -> str:
    return "\n".join([
        "Control a web browser with the mouse and keyboard; after each action you get a new "
        "screenshot.",
        f"* The screen is {width}x{height} pixels. A coordinate is [x, y] in those pixels, "
        "x from the left edge and y from the top edge.",
        "* Aim at the middle of the element you want, never at its border.",
        "* To scroll inside a panel that sits over the page, mouse_move over it first.",
        "* Close a popup with its close button, or with key and keys=['Escape'].",
        "* type clicks its coordinate first and presses Enter afterwards unless press_enter is "
        "false; use press_enter=false where suggestions pop up and click the button instead.",
        "* Pick dates on calendar widgets by clicking, not by typing.",
        "* Use wait when a page needs time to load or to change.",
    ])


def tool_schema(width: int, height: int) -> dict[str, Any]:
    """The ``computer_use`` tool for a model space of ``width`` x ``height`` pixels."""
    text = {"type": "string"}
    return {
        "type": "function",
        "function": {
            "name": "computer_use",
            "description": _description(width, height),
            "parameters": {
                "properties": {
                    "action": {
                        "description": "What to do: " + ", ".join(f"`{a}`" for a in ACTIONS)
                        + ". `key` presses its keys down in order and releases them in "
                        "reverse; `scroll` moves the page by about a screen.",
                        "enum": list(ACTIONS),
                        "type": "string",
                    },
                    "keys": {"description": "Keys for `key`, e.g. [\"Control\", \"a\"].",
                             "type": "array"},
                    "text": {"description": "Text for `type`.", **text},
                    "press_enter": {"description": "`type` only: press Enter after the text "
                                    "(default true).", "type": "boolean"},
                    "delete_existing_text": {"description": "`type` only: clear the field "
                                             "first (default false).", "type": "boolean"},
                    "coordinate": {"description": "[x, y] in screen pixels, for `left_click`, "
                                   "`mouse_move` and `type`.", "type": "array"},
                    "pixels": {"description": "`scroll` only: positive scrolls up, negative "
                               "scrolls down.", "type": "number"},
                    "url": {"description": "`visit_url` only: the address to open.", **text},
                    "query": {"description": "`web_search` only: what to search for.", **text},
                    "fact": {"description": "`pause_and_memorize_fact` only: the fact to keep.",
                             **text},
                    "time": {"description": "`wait` only: seconds to wait.", "type": "number"},
                    "status": {"description": "`terminate` only: how the task ended.",
                               "type": "string", "enum": ["success", "failure"]},
                },
                "required": ["action"],
                "type": "object",
            },
        },
    }


def system_text(template: str, width: int, height: int) -> str:
    """The system message for a model space of ``width`` x ``height``.

    Raises:
        KeyError, IndexError, ValueError: ``template`` has placeholders other than
            ``{tool_descs}`` (checked once by ``load_template``).
    """
    tools = json.dumps(tool_schema(width, height), ensure_ascii=False)
    return SYSTEM_PREFIX + "\n\n" + template.format(tool_descs=tools)


def load_template(released: str | None) -> Released | None:
    """``FN_CALL_TEMPLATE`` from a clone under ``released`` (or ``$OWNLOOP_PATH``), if any."""
    return find_released(CANDIDATES, (TEMPLATE_NAME,), released)
