"""The pyautogui whitelist itself: the calls that exist, their parameters in pyautogui's order,
the keyword spellings models use, and how literal arguments are read and checked.

Nothing here evaluates anything: arguments are read from the syntax tree (``read_literal``), and
a value outside what a call accepts raises ``Refused`` with a one-line reason.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from ownloop.agents.base import clip
from ownloop.agents.keys import UnknownKeyError, to_playwright

__all__ = [
    "BUTTONS",
    "IGNORED",
    "KEY_NAMES",
    "LARGEST",
    "MODULES",
    "PARAMS",
    "RENAMES",
    "Refused",
    "check_name",
    "describe_statement",
    "range_length",
    "read_button",
    "read_callee",
    "read_coordinate",
    "read_count",
    "read_key",
    "read_literal",
    "read_number",
]


class Refused(Exception):
    """A statement outside the whitelist; the message says why, in one line."""


MODULES = frozenset({"pyautogui", "time"})
BUTTONS = {
    "left": "left",
    "primary": "left",
    "right": "right",
    "secondary": "right",
    "middle": "middle",
}
# pyautogui key names keys.py does not know, as Playwright names (keys.py reads those too).
KEY_NAMES = {
    "\n": "Enter",
    "\r": "Enter",
    "\t": "Tab",
    "ctrlleft": "ControlLeft",
    "ctrlright": "ControlRight",
    "shiftleft": "ShiftLeft",
    "shiftright": "ShiftRight",
    "altleft": "AltLeft",
    "altright": "AltRight",
    "optionleft": "AltLeft",
    "optionright": "AltRight",
    "winleft": "MetaLeft",
    "winright": "MetaRight",
    "add": "NumpadAdd",
    "subtract": "NumpadSubtract",
    "multiply": "NumpadMultiply",
    "divide": "NumpadDivide",
    "decimal": "NumpadDecimal",
    "volumeup": "AudioVolumeUp",
    "volumedown": "AudioVolumeDown",
    "volumemute": "AudioVolumeMute",
    "playpause": "MediaPlayPause",
    "nexttrack": "MediaTrackNext",
    "prevtrack": "MediaTrackPrevious",
    "prtscr": "PrintScreen",
    "print": "PrintScreen",
    **{f"num{n}": f"Numpad{n}" for n in range(10)},
}
IGNORED = ("interval", "duration", "tween", "logScreenshot", "_pause")
# Parameters in pyautogui's positional order (tween and the others are read and ignored).
PARAMS: dict[str, tuple[str, ...]] = {
    "click": (
        "x",
        "y",
        "clicks",
        "interval",
        "button",
        "duration",
        "tween",
        "logScreenshot",
        "_pause",
    ),
    "doubleClick": ("x", "y", "interval", "button", "duration", "tween", "logScreenshot", "_pause"),
    "tripleClick": ("x", "y", "interval", "button", "duration", "tween", "logScreenshot", "_pause"),
    "rightClick": ("x", "y", "interval", "duration", "tween", "logScreenshot", "_pause"),
    "middleClick": ("x", "y", "interval", "duration", "tween", "logScreenshot", "_pause"),
    "moveTo": ("x", "y", "duration", "tween", "logScreenshot", "_pause"),
    "moveRel": ("xOffset", "yOffset", "duration", "tween", "logScreenshot", "_pause"),
    "dragTo": ("x", "y", "duration", "tween", "button", "logScreenshot", "_pause", "mouseDownUp"),
    "dragRel": (
        "xOffset",
        "yOffset",
        "duration",
        "tween",
        "button",
        "logScreenshot",
        "_pause",
        "mouseDownUp",
    ),
    "mouseDown": ("x", "y", "button", "duration", "tween", "logScreenshot", "_pause"),
    "mouseUp": ("x", "y", "button", "duration", "tween", "logScreenshot", "_pause"),
    "scroll": ("clicks", "x", "y", "logScreenshot", "_pause"),
    "hscroll": ("clicks", "x", "y", "logScreenshot", "_pause"),
    "write": ("message", "interval", "logScreenshot", "_pause"),
    "typewrite": ("message", "interval", "logScreenshot", "_pause"),
    "press": ("keys", "presses", "interval", "logScreenshot", "_pause"),
    "keyDown": ("key", "logScreenshot", "_pause"),
    "keyUp": ("key", "logScreenshot", "_pause"),
    "sleep": ("seconds",),
    "time.sleep": ("seconds",),
    "computer.triple_click": ("x", "y"),
    "computer.wait": ("seconds",),
    "computer.terminate": ("status", "answer"),
}
# Keyword spellings models use for the same parameter (OSWorld's correct_pyautogui_arguments).
RENAMES: dict[str, dict[str, str]] = {
    "write": {"text": "message", "content": "message"},
    "typewrite": {"text": "message", "content": "message"},
    "press": {"key": "keys"},
    "keyDown": {"keys": "key"},
    "keyUp": {"keys": "key"},
    "time.sleep": {"secs": "seconds"},
    "computer.wait": {"time": "seconds"},
}


# ---------------------------------------------------------------------- the syntax tree


def describe_statement(node: ast.stmt) -> str:
    if isinstance(node, ast.ImportFrom):
        return f"from {node.module or '.'} import"
    if isinstance(node, ast.Expr):
        return f"the expression {type(node.value).__name__}"
    return f"a {type(node).__name__} statement"


def check_name(name: str) -> None:
    if name.startswith("__") or name.endswith("__"):
        raise Refused(f"dunder names are not allowed ({name[:40]})")


def read_callee(func: ast.expr) -> str:
    """The whitelisted name of a call's function: 'pyautogui.click', 'time.sleep', ..."""
    if isinstance(func, ast.Name):
        check_name(func.id)
        raise Refused(f"calling {func.id[:40]}() is not allowed")
    if not isinstance(func, ast.Attribute):
        raise Refused(f"calling a {type(func).__name__} is not allowed")
    check_name(func.attr)
    owner = func.value
    if not isinstance(owner, ast.Name) or owner.id not in ("pyautogui", "time", "computer"):
        raise Refused("attribute access is allowed only on pyautogui, computer and time")
    name = f"{owner.id}.{func.attr}"
    if owner.id == "pyautogui":
        allowed = func.attr == "hotkey" or (func.attr in PARAMS and "." not in func.attr)
    else:
        allowed = name in PARAMS
    if not allowed:
        raise Refused(f"{name[:60]}() is not allowed")
    return name


def read_literal(node: ast.expr, depth: int = 0) -> Any:
    """A literal argument: a number, string, bool, None, or a flat list/tuple of those."""
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, str | bool | int | float):
            return value
    elif (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub | ast.UAdd)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int | float)
        and not isinstance(node.operand.value, bool)
    ):
        value = node.operand.value
        return -value if isinstance(node.op, ast.USub) else value
    elif isinstance(node, ast.List | ast.Tuple) and depth == 0:
        if len(node.elts) > 100:
            raise Refused("a list of over 100 items is not allowed")
        return [read_literal(item, 1) for item in node.elts]
    if isinstance(node, ast.Lambda):
        raise Refused("lambdas are not allowed")
    if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        raise Refused("comprehensions are not allowed")
    if isinstance(node, ast.Name):
        check_name(node.id)
    raise Refused(f"arguments must be literal values, not {type(node).__name__}")


def range_length(node: ast.expr) -> int:
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and not node.keywords
        and 1 <= len(node.args) <= 3
    ):
        raise Refused("only 'for NAME in range(n):' loops are allowed")
    bounds = [read_literal(arg) for arg in node.args]
    if not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
        raise Refused("range() needs whole numbers")
    if len(bounds) == 3 and bounds[2] == 0:
        raise Refused("range() step must not be zero")
    return len(range(*bounds))


# ---------------------------------------------------------------------- value helpers

LARGEST = 1e7  # no screen coordinate or offset is bigger; keeps float conversions safe


def read_number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Refused(f"{name} must be a number, got {clip(repr(value), 40, escape=True)}")
    if not (isinstance(value, int) or math.isfinite(value)) or abs(value) > LARGEST:
        raise Refused(f"{name} is out of range: {clip(repr(value), 40, escape=True)}")
    return float(value)


def read_coordinate(value: object, name: str) -> float:
    return read_number(value, name)


def read_count(value: object, name: str, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Refused(
            f"{name} must be a whole number >= 0, got {clip(repr(value), 40, escape=True)}"
        )
    if value > limit:
        raise Refused(f"{name}={value} is over the limit of {limit}")
    return value


def read_button(value: object) -> str:
    if not isinstance(value, str) or value.lower() not in BUTTONS:
        raise Refused(
            f"button must be left, right or middle, got {clip(repr(value), 40, escape=True)}"
        )
    return BUTTONS[value.lower()]


def read_key(value: object) -> str:
    """A key name as keys.py reads it (pyautogui's own spellings mapped first)."""
    if not isinstance(value, str) or not value:
        raise Refused(
            f"a key must be a name like 'enter', got {clip(repr(value), 40, escape=True)}"
        )
    name = KEY_NAMES.get(value if len(value) == 1 else value.lower(), value)
    try:
        to_playwright(name)
    except UnknownKeyError as error:
        raise Refused(str(error)) from None
    return name
