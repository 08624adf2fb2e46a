"""pyautogui code sent to ``/execute``, performed as real X input events, never run as Python.

OSWorld's client sends each operation as ``["python", "-c", "import pyautogui; import time;
pyautogui.FAILSAFE = False; <code>"]`` (or the same as one string). The test desktop recognises a
command of that form (``pyautogui_code``), drops the known prelude, and hands ``<code>`` to
ownloop's whitelist interpreter (``ownloop.agents.pyautogui``), which reads literal-argument
pyautogui calls, ``time.sleep`` and bounded ``for`` loops from the syntax tree and runs nothing.
Each action it yields is then performed with ``xdotool`` (XTest events) on the desktop's display.

It is stricter than ``python -c`` in one way: when any statement is refused, *nothing* is
performed (``python -c`` would have run the statements before it); the answer carries a non-zero
return code and the reason. A point off the screen is refused too (pyautogui itself raises for
one), never clamped.
"""

from __future__ import annotations

import math
import re
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ownloop.agents.coordinates import Point
from ownloop.agents.keys import UnknownKeyError
from ownloop.agents.pyautogui import CodeSyntaxError, interpret
from ownloop.desktopserver.capture import mouse_location
from ownloop.desktopserver.keysyms import keysym
from ownloop.store import events

__all__ = ["Performed", "perform_code", "pyautogui_code"]

_PRELUDE = re.compile(
    r"\A\s*import\s+pyautogui\s*[;\n]\s*import\s+time\s*[;\n]\s*"
    r"pyautogui\.FAILSAFE\s*=\s*False\s*[;\n]"
)
_PYTHONS = frozenset({"python", "python3", "/usr/bin/python", "/usr/bin/python3"})
_BUTTONS = {"left": "1", "middle": "2", "right": "3"}
_WHEEL = {"up": "4", "down": "5", "left": "6", "right": "7"}
_TYPE_DELAY_MS = "6"  # between typed characters: fast, and every X client keeps up


class Performed(NamedTuple):
    """What ``/execute`` answers for a pyautogui block."""

    returncode: int
    error: str  # empty when every action was performed
    actions: int  # how many actions were performed


class _Screen:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height

    def point(self, x: float, y: float) -> Point:
        return Point(x, y)

    def offset(self, dx: float, dy: float) -> Point:
        return Point(dx, dy)


def pyautogui_code(command: object) -> str | None:
    """The code of a ``python -c`` command that imports pyautogui, else None (not ours to read).

    ``command`` is ``/execute``'s ``command``: an argv list or a shell string. The known OSWorld
    prelude (``import pyautogui; import time; pyautogui.FAILSAFE = False;``) is dropped; any
    other code that mentions pyautogui is returned whole, for the interpreter to judge.
    """
    argv: Sequence[object]
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError:
            return None
    elif isinstance(command, list):
        argv = command
    else:
        return None
    if len(argv) != 3 or argv[0] not in _PYTHONS or argv[1] != "-c":
        return None
    code = argv[2]
    if not isinstance(code, str) or "pyautogui" not in code:
        return None
    return _PRELUDE.sub("", code, count=1).lstrip(" \t")


def perform_code(
    code: str, size: tuple[int, int], env: Mapping[str, str], deadline_s: float
) -> Performed:
    """Interpret ``code`` and perform its actions on the display ``env['DISPLAY']``.

    Args:
        code: pyautogui code, the prelude already dropped.
        size: the screen's (width, height); a point outside it refuses the block.
        env: the desktop's environment (``DISPLAY``, ``XAUTHORITY``) for ``xdotool``.
        deadline_s: seconds the whole block may take; past it the rest is not performed.
    """
    screen = _Screen(*size)
    try:
        outcome = interpret(code, screen, pointer=_pointer(env))
    except CodeSyntaxError as error:
        return Performed(1, f"refused: {error}", 0)
    if outcome.rejected is not None:
        return Performed(1, f"refused: {outcome.rejected}", 0)
    if outcome.control is not None:
        return Performed(1, f"refused: {outcome.control.raw} is not a pyautogui call", 0)
    try:
        commands = [_xdotool(action, screen) for action in outcome.actions]
    except (_OffScreen, UnknownKeyError) as error:
        return Performed(1, f"refused: {error}", 0)
    end = time.monotonic() + deadline_s
    for done, argv in enumerate(commands):
        left = end - time.monotonic()
        if left <= 0:
            return Performed(1, f"timed out after {done} of {len(commands)} actions", done)
        if argv[0] == "sleep":
            time.sleep(min(float(argv[1]), left))
            continue
        try:
            result = subprocess.run(
                ["xdotool", *argv], env=dict(env), capture_output=True, timeout=left, check=False
            )
        except subprocess.TimeoutExpired:
            return Performed(1, f"timed out after {done} of {len(commands)} actions", done)
        if result.returncode != 0:
            message = result.stderr.decode(errors="replace").strip()[:300]
            return Performed(result.returncode, f"xdotool failed: {message}", done)
    return Performed(0, "", len(commands))


class _OffScreen(ValueError):
    pass


def _pointer(env: Mapping[str, str]) -> Point | None:
    """The pointer's position now (the interpreter tracks it from here), None if unknown."""
    try:
        values = mouse_location(env, 5)
    except subprocess.TimeoutExpired:
        return None
    try:
        return Point(float(values["X"]), float(values["Y"]))
    except (KeyError, ValueError):
        return None


def _at(x: float | None, y: float | None, screen: _Screen) -> list[str]:
    """``mousemove X Y`` for a point on the screen, or nothing when there is no point."""
    if x is None or y is None:
        return []
    if not (0 <= x <= screen.width and 0 <= y <= screen.height):
        raise _OffScreen(f"point ({x:g}, {y:g}) is off the {screen.width}x{screen.height} screen")
    px = min(round(x), screen.width - 1)
    py = min(round(y), screen.height - 1)
    return ["mousemove", str(px), str(py)]


def _xdotool(action: events.Action, screen: _Screen) -> list[str]:
    """One xdotool argv (without the program name) for one action; ``["sleep", s]`` for a wait."""
    match action:
        case events.Click():
            button = _BUTTONS[action.button]
            repeat = ["--repeat", str(action.count), "--delay", "60"] if action.count > 1 else []
            return [*_at(action.x, action.y, screen), "click", *repeat, button]
        case events.Move():
            return _at(action.x, action.y, screen)
        case events.Drag():
            start = _at(action.x, action.y, screen)
            end = _at(action.x2, action.y2, screen)
            return [*start, "mousedown", "1", *end, "mouseup", "1"]
        case events.ButtonDown():
            return [*_at(action.x, action.y, screen), "mousedown", _BUTTONS[action.button]]
        case events.ButtonUp():
            return [*_at(action.x, action.y, screen), "mouseup", _BUTTONS[action.button]]
        case events.Scroll():
            notches = max(1, math.ceil(action.amount))
            wheel = _WHEEL[action.direction]
            return [*_at(action.x, action.y, screen), "click", "--repeat", str(notches), wheel]
        case events.TypeText():
            return ["type", "--delay", _TYPE_DELAY_MS, "--", action.text]
        case events.Hotkey():
            return ["key", "--", "+".join(keysym(key) for key in action.keys)]
        case events.KeyDown():
            return ["keydown", "--", keysym(action.key)]
        case events.KeyUp():
            return ["keyup", "--", keysym(action.key)]
        case events.Wait():
            return ["sleep", f"{action.seconds:g}"]
        case events.Rejected():
            raise _OffScreen(action.reason)
    raise _OffScreen(f"cannot perform {type(action).__name__} on the desktop")
