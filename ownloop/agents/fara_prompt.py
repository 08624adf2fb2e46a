"""Fara-7B's system message: the function-calling template and its one tool, ``computer_use``.

The released harness (microsoft/fara) builds the system message each turn as
``"You are a helpful assistant." + "\\n\\n" + FN_CALL_TEMPLATE.format(tool_descs=<tool JSON>)``,
where the tool's description states the screen size in the model's space (1428x896 for a
1440x900 page). ``FN_CALL_TEMPLATE`` is a string constant of ``qwen_helpers/fncall_prompt.py``
and is read from the user's clone when there is one (``released.py``; the file is read, never
run). The tool JSON is built here from the schema facts: the same name, actions, argument names,
types and enum values. Its wording comes from the clone too when there is one: the tool's
description (an f-string property of the ``computer_use`` tool class in ``src/fara/_prompts.py``,
which names the screen size) and every property's description (its ``parameters`` dict) are read
from that file with ``ast`` (``read_tool_texts``), never by importing it. Without a clone, a
template and descriptions written for this project state the same grammar.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

from ownloop.agents.released import Released, find_released, read_facts
from ownloop.errors import OwnloopError

__all__ = [
    "ACTIONS",
    "BUILTIN_TEMPLATE",
    "CANDIDATES",
    "SYSTEM_PREFIX",
    "TEMPLATE_NAME",
    "TOOL_CANDIDATES",
    "ToolTexts",
    "fara_texts",
    "load_fara_texts",
    "read_tool_texts",
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
TOOL_CANDIDATES = ("src/fara/_prompts.py", "fara/_prompts.py", "_prompts.py")
"""Where the ``computer_use`` tool class lives in a clone of microsoft/fara."""
TOOL_NAME = "computer_use"
_SIZE_FIELDS = {"display_width_px": "{width}", "display_height_px": "{height}"}

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
    return "\n".join(
        [
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
        ]
    )


class ToolTexts(NamedTuple):
    """The tool's wording as a clone of microsoft/fara states it."""

    description: str  # a str.format template: {width} and {height} are the screen size
    properties: dict[str, str]  # each parameter's description, by parameter name


def tool_schema(width: int, height: int, texts: ToolTexts | None = None) -> dict[str, Any]:
    """The ``computer_use`` tool for a model space of ``width`` x ``height`` pixels, worded as
    ``texts`` (read from a clone) or, without them, in ownloop's own words."""
    schema = _own_schema(width, height)
    if texts is None:
        return schema
    function = schema["function"]
    function["description"] = texts.description.format(width=width, height=height)
    for name, spec in function["parameters"]["properties"].items():
        spec["description"] = texts.properties[name]
    return schema


def _own_schema(width: int, height: int) -> dict[str, Any]:
    text = {"type": "string"}
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": _description(width, height),
            "parameters": {
                "properties": {
                    "action": {
                        "description": "What to do: "
                        + ", ".join(f"`{a}`" for a in ACTIONS)
                        + ". `key` presses its keys down in order and releases them in "
                        "reverse; `scroll` moves the page by about a screen.",
                        "enum": list(ACTIONS),
                        "type": "string",
                    },
                    "keys": {
                        "description": 'Keys for `key`, e.g. ["Control", "a"].',
                        "type": "array",
                    },
                    "text": {"description": "Text for `type`.", **text},
                    "press_enter": {
                        "description": "`type` only: press Enter after the text (default true).",
                        "type": "boolean",
                    },
                    "delete_existing_text": {
                        "description": "`type` only: clear the field first (default false).",
                        "type": "boolean",
                    },
                    "coordinate": {
                        "description": "[x, y] in screen pixels, for `left_click`, "
                        "`mouse_move` and `type`.",
                        "type": "array",
                    },
                    "pixels": {
                        "description": "`scroll` only: positive scrolls up, negative scrolls down.",
                        "type": "number",
                    },
                    "url": {"description": "`visit_url` only: the address to open.", **text},
                    "query": {"description": "`web_search` only: what to search for.", **text},
                    "fact": {
                        "description": "`pause_and_memorize_fact` only: the fact to keep.",
                        **text,
                    },
                    "time": {"description": "`wait` only: seconds to wait.", "type": "number"},
                    "status": {
                        "description": "`terminate` only: how the task ended.",
                        "type": "string",
                        "enum": ["success", "failure"],
                    },
                },
                "required": ["action"],
                "type": "object",
            },
        },
    }


def system_text(template: str, width: int, height: int, texts: ToolTexts | None = None) -> str:
    """The system message for a model space of ``width`` x ``height``.

    Raises:
        KeyError, IndexError, ValueError: ``template`` has placeholders other than
            ``{tool_descs}`` (checked once by ``load_template``).
    """
    tools = json.dumps(tool_schema(width, height, texts), ensure_ascii=False)
    return SYSTEM_PREFIX + "\n\n" + template.format(tool_descs=tools)


def load_fara_texts(roots: str) -> Released | None:
    """The texts of the first clone of microsoft/fara under ``roots`` (a colon list of folders,
    as ``--released`` gives them): ``FN_CALL_TEMPLATE`` and the tool's wording, as constants
    named ``FN_CALL_TEMPLATE``, ``computer_use.description`` (with ``{width}``/``{height}``)
    and ``computer_use.parameters.<name>``; None when no folder holds either file. The files
    are read, never run. The source names the files used, and which half is built-in.

    Raises:
        OwnloopError: ``_prompts.py`` is there but holds no ``computer_use`` tool this reader
            knows.
    """
    constants: dict[str, str] = {}
    sources: list[str] = []
    for root in _roots(roots):
        template = find_released(CANDIDATES, (TEMPLATE_NAME,), str(root))
        tools = _find_tool_texts(root)
        if template is None and tools is None:
            continue
        if template is not None:
            constants[TEMPLATE_NAME] = template.constants[TEMPLATE_NAME]
            sources.append(template.source.removeprefix("released:"))
        if tools is not None:
            texts, path = tools
            constants[f"{TOOL_NAME}.description"] = texts.description
            for name, text in texts.properties.items():
                constants[f"{TOOL_NAME}.parameters.{name}"] = text
            sources.append(str(path))
        note = (
            ""
            if template is not None and tools is not None
            else " (tool text built-in)"
            if tools is None
            else " (template built-in)"
        )
        digests = template.sha256 if template is not None else ()
        commit = template.commit if template is not None else ""
        if tools is not None:
            tool_digests, tool_commit = read_facts(tools[1])
            digests, commit = digests + tool_digests, commit or tool_commit
        return Released(constants, "released:" + ", ".join(sources) + note, digests, commit)
    return None


def fara_texts(released: Released | None) -> tuple[str, ToolTexts | None]:
    """The template and the tool's wording of ``load_fara_texts``'s texts (built-in where
    they hold none)."""
    if released is None:
        return BUILTIN_TEMPLATE, None
    template = released.constants.get(TEMPLATE_NAME, BUILTIN_TEMPLATE)
    description = released.constants.get(f"{TOOL_NAME}.description")
    if description is None:
        return template, None
    prefix = f"{TOOL_NAME}.parameters."
    properties = {
        key.removeprefix(prefix): text
        for key, text in released.constants.items()
        if key.startswith(prefix)
    }
    return template, ToolTexts(description, properties)


def _roots(roots: str) -> list[Path]:
    return [Path(part).expanduser() for part in roots.split(os.pathsep) if part.strip()]


def _find_tool_texts(root: Path) -> tuple[ToolTexts, Path] | None:
    for candidate in TOOL_CANDIDATES:
        for path in (root / candidate, root / Path(candidate).name):
            if not path.is_file():
                continue
            try:
                source = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            texts = read_tool_texts(source)
            if isinstance(texts, str):
                raise OwnloopError(
                    f"fara7b: {path.resolve()}: {texts}. Point --released at an "
                    "unmodified clone of microsoft/fara"
                )
            return texts, path.resolve()
    return None


def read_tool_texts(source: str) -> ToolTexts | str:
    """The ``computer_use`` tool's description and parameter descriptions in the text of
    microsoft/fara's ``_prompts.py``, or why they could not be read (a short phrase).

    The module is parsed, never run: the class whose ``name`` is ``"computer_use"``; its
    ``description`` property, an f-string whose only fields are ``self.display_width_px`` and
    ``self.display_height_px`` (becoming ``{width}`` and ``{height}``), ``.strip()`` applied as
    written; its ``parameters`` dict, read as literals (``"...".strip()`` applied likewise).
    Every parameter ownloop's schema has must be described there.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "it does not parse as Python"
    tool = next(
        (
            node
            for node in tree.body
            if isinstance(node, ast.ClassDef) and _class_constant(node, "name") == TOOL_NAME
        ),
        None,
    )
    if tool is None:
        return f"no class with name = {TOOL_NAME!r}"
    description = _description_template(tool)
    if description is None:
        return "its description is not an f-string naming only the display size"
    parameters = _literal(_class_value(tool, "parameters"))
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(properties, dict):
        return "its parameters are not a literal dict with properties"
    found = {
        name: spec.get("description") for name, spec in properties.items() if isinstance(spec, dict)
    }
    needed = _own_schema(1, 1)["function"]["parameters"]["properties"]
    missing = [name for name in needed if not isinstance(found.get(name), str)]
    if missing:
        return f"no description for {', '.join(missing)}"
    return ToolTexts(description, {name: str(found[name]) for name in needed})


def _class_value(node: ast.ClassDef, name: str) -> ast.expr | None:
    for item in node.body:
        if (
            isinstance(item, ast.Assign)
            and len(item.targets) == 1
            and isinstance(item.targets[0], ast.Name)
            and item.targets[0].id == name
        ):
            return item.value
        if (
            isinstance(item, ast.AnnAssign)
            and isinstance(item.target, ast.Name)
            and item.target.id == name
        ):
            return item.value
    return None


def _class_constant(node: ast.ClassDef, name: str) -> object:
    return _literal(_class_value(node, name))


def _description_template(node: ast.ClassDef) -> str | None:
    """The description property's f-string as a str.format template, or None."""
    for item in node.body:
        if not (isinstance(item, ast.FunctionDef) and item.name == "description"):
            continue
        returned = [stmt.value for stmt in item.body if isinstance(stmt, ast.Return)]
        if len(returned) != 1 or returned[0] is None:
            return None
        value, strip = _unstrip(returned[0])
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            text: str | None = value.value.replace("{", "{{").replace("}", "}}")
        elif isinstance(value, ast.JoinedStr):
            text = _fstring_template(value)
        else:
            return None
        if text is None:
            return None
        return text.strip() if strip else text
    return None


def _fstring_template(node: ast.JoinedStr) -> str | None:
    parts: list[str] = []
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            parts.append(value.value.replace("{", "{{").replace("}", "}}"))
        elif (
            isinstance(value, ast.FormattedValue)
            and value.conversion == -1
            and value.format_spec is None
            and isinstance(value.value, ast.Attribute)
            and value.value.attr in _SIZE_FIELDS
        ):
            parts.append(_SIZE_FIELDS[value.value.attr])
        else:
            return None
    return "".join(parts)


def _unstrip(node: ast.expr) -> tuple[ast.expr, bool]:
    """``X.strip()`` → (X, True); anything else → (node, False)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "strip"
        and not node.args
        and not node.keywords
    ):
        return node.func.value, True
    return node, False


def _literal(node: ast.expr | None) -> object:
    """A literal (dicts, lists, strings, numbers, booleans), with ``"...".strip()`` applied;
    None for anything else. Nothing is evaluated."""
    if node is None:
        return None
    inner, strip = _unstrip(node)
    if strip:
        text = _literal(inner)
        return text.strip() if isinstance(text, str) else None
    if isinstance(node, ast.Dict):
        keys = [_literal(key) for key in node.keys]
        values = [_literal(value) for value in node.values]
        if any(not isinstance(key, str) for key in keys):
            return None
        return dict(zip(keys, values, strict=True))
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Constant) and isinstance(node.value, str | int | float | bool):
        return node.value
    return None
