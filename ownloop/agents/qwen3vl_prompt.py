"""The system and instruction texts of the ``qwen3vl`` agent.

The request's shape follows OSWorld's released ``Qwen3VLAgent`` (a "# Tools" section holding one
``computer_use`` function as JSON, the ``<tool_call>`` format, a response-format section; then
"Instruction: ..." and "Previous actions: ..." in the user turn). Without a clone its prose is
ownloop's own wording of the same action space. With ``--released`` naming a clone of OSWorld,
the texts are read from it, never run: that agent builds them inside ``predict()``
(``mm_agents/qwen3vl_agent.py``), so the reader takes the string literals assigned there (the
description's lines, the action descriptions, the literal halves of the system prompt around its
tool JSON, the instruction f-string with its two placeholders); EvoCUA's S2 prompt is module
constants (``mm_agents/evocua/prompts.py``). Nothing of either is copied here.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from pathlib import Path

from ownloop.agents.released import (
    Released,
    ReleasedSpec,
    load_released,
    read_facts,
    read_module,
    search_roots,
)

__all__ = [
    "ACTIONS",
    "EVOCUA_ACTIONS",
    "EVOCUA_SPEC",
    "QWEN3VL_SPEC",
    "instruction_text",
    "load_qwen3vl_texts",
    "system_text",
]

QWEN3VL_FILE = "mm_agents/qwen3vl_agent.py"
_RESOLUTION = "\x00resolution\x00"  # where the released description's conditional line goes

EVOCUA_SPEC = ReleasedSpec(
    "xlang-ai/OSWorld",
    candidates=("mm_agents/evocua/prompts.py",),
    names=("S2_SYSTEM_PROMPT", "S2_DESCRIPTION_PROMPT_TEMPLATE", "S2_ACTION_DESCRIPTION_BASE"),
)
QWEN3VL_SPEC = ReleasedSpec("xlang-ai/OSWorld", loader=lambda roots: load_qwen3vl_texts(roots))
"""Both prompts of the qwen3vl agent, read from one clone of OSWorld."""


def _literal(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _template(node: ast.expr) -> str | None:
    """An f-string as a str.format template: its literal parts, and ``{name}`` for each plain
    name it interpolates (None when it interpolates anything else)."""
    if not isinstance(node, ast.JoinedStr):
        return _literal(node)
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            parts.append(value.value.replace("{", "{{").replace("}", "}}"))
        elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name):
            parts.append("{" + value.value.id + "}")
        else:
            return None
    return "".join(parts)


def _predict_texts(path: Path) -> dict[str, str]:
    """The literal texts ``predict()`` of the released agent assigns (read, never run)."""
    tree = read_module(path)
    if tree is None:
        return {}
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.FunctionDef) and node.name == "predict"):
            continue
        for statement in ast.walk(node):
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
                continue
            target, value = statement.targets[0], statement.value
            if not isinstance(target, ast.Name):
                continue
            if target.id == "description_prompt_lines" and isinstance(value, ast.List):
                lines = [_literal(item) or _RESOLUTION for item in value.elts]
                found["description"] = "\n".join(lines)
            elif target.id == "action_description_prompt" and _literal(value) is not None:
                found["action_description"] = _literal(value) or ""
            elif target.id == "instruction_prompt" and _template(value) is not None:
                found["instruction"] = _template(value) or ""
            elif target.id == "system_prompt" and isinstance(value, ast.BinOp):
                left, right = value.left, value.right
                head = _literal(left.left) if isinstance(left, ast.BinOp) else None
                tail = _literal(right)
                if head is not None and tail is not None:
                    found["system_head"], found["system_tail"] = head, tail
    wanted = ("description", "action_description", "instruction", "system_head", "system_tail")
    return found if all(name in found for name in wanted) else {}


def load_qwen3vl_texts(roots: str) -> Released | None:
    """Qwen3-VL's texts from ``mm_agents/qwen3vl_agent.py`` and EvoCUA's constants from
    ``mm_agents/evocua/prompts.py`` of the first clone of OSWorld under ``roots`` that holds
    either (a root may also be the ``mm_agents`` folder itself); None when none does."""
    for root in search_roots(roots):
        constants: dict[str, str] = {}
        sources: list[str] = []
        digests: tuple[tuple[str, str], ...] = ()
        commit = ""
        for path in (root / QWEN3VL_FILE, root / Path(QWEN3VL_FILE).name):
            texts = _predict_texts(path) if path.is_file() else {}
            if texts:
                constants.update({f"qwen3vl.{name}": text for name, text in texts.items()})
                sources.append(str(path.resolve()))
                digests, commit = read_facts(path)
                break
        evocua = load_released(EVOCUA_SPEC._replace(loader=None), str(root))
        if evocua is not None:
            constants.update(evocua.constants)
            sources.append(evocua.source.removeprefix("released:"))
            digests, commit = digests + evocua.sha256, commit or evocua.commit
        if constants:
            return Released(constants, "released:" + ", ".join(sources), digests, commit)
    return None


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


def _released_qwen3vl(texts: dict[str, str], resolution: str) -> str | None:
    if "qwen3vl.description" not in texts:
        return None
    description = texts["qwen3vl.description"].replace(_RESOLUTION, f"* {resolution}")
    tool = _tool(description, ACTIONS, texts["qwen3vl.action_description"])
    return texts["qwen3vl.system_head"] + json.dumps(tool) + texts["qwen3vl.system_tail"]


def system_text(prompt: str, screen: tuple[int, int], released: Released | None) -> str:
    """The system message for a screen stated as ``screen`` (1000x1000 in relative mode).

    ``prompt`` is "qwen3vl" or "evocua"; ``released`` holds EvoCUA's constants from a clone.
    """
    resolution = f"The screen's resolution is {screen[0]}x{screen[1]}."
    actions = EVOCUA_ACTIONS if prompt == "evocua" else ACTIONS
    action_text = "\n" + "".join(f"* `{name}`: {_MEANINGS[name]}.\n" for name in actions)
    if prompt == "qwen3vl" and released is not None:
        text = _released_qwen3vl(released.constants, resolution)
        if text is not None:
            return text
    if prompt == "evocua" and released is not None and "S2_SYSTEM_PROMPT" in released.constants:
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


def instruction_text(task: str, earlier: Sequence[str], released: Released | None = None) -> str:
    """The user turn's text: the task, then the summaries of the steps before the window (the
    released f-string's wording when ``released`` holds it)."""
    previous = "\n".join(earlier) if earlier else "None"
    template = released.constants.get("qwen3vl.instruction") if released is not None else None
    if template is not None:
        try:
            return template.format(instruction=task, previous_actions_str=previous)
        except (KeyError, IndexError, ValueError):
            pass  # a placeholder this reader does not know: ownloop's wording
    return (
        "\nChoose the next move from the screenshot, the instruction and the actions so far."
        f"\n\nInstruction: {task}\n\nPrevious actions:\n{previous}"
    )
