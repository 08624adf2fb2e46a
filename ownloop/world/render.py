"""Agent-neutral actions → the literal pyautogui calls a desktop executes.

Model text never reaches the guest as code: an action becomes a :class:`DesktopCall` (a
whitelisted function and checked arguments), and :func:`render` writes the one call from those
fields alone — integers inside the screen, a button from three names, keys from pyautogui's own
key names, text as the ``repr`` of a validated ``str`` (a Python string literal, nothing else).
A point off the screen is clamped to its edge and the asked point is kept in ``clamped`` (so the
effect says so). Typing is sent as keystrokes (``pyautogui.write``), not as a clipboard paste:
a paste never reaches xterm and hung the server with ``xclip`` (reference/osworld.md §7).
"""

from __future__ import annotations

import math
import string

from ownloop.errors import OwnloopError
from ownloop.store.events import (
    Action,
    ButtonDown,
    ButtonUp,
    Click,
    DesktopCall,
    Drag,
    Hotkey,
    KeyDown,
    KeyUp,
    Move,
    Op,
    Scroll,
    Sleep,
    TypeText,
    Wait,
)

__all__ = ["MAX_TEXT", "PYAUTOGUI_KEYS", "RenderRefused", "desktop_ops", "render"]

MAX_TEXT = 4000  # characters one write may type (a longer text is refused, not cut)
_MAX_WAIT_S = 30.0
_BUTTONS = frozenset({"left", "right", "middle"})
_FUNCTIONS = frozenset(
    {"click", "moveTo", "dragTo", "mouseDown", "mouseUp", "scroll", "hscroll", "write"}
    | {"press", "hotkey", "keyDown", "keyUp"}
)
# pyautogui's key names (its KEYBOARD_KEYS) that a model may press: printable characters, and
# the named keys below.
PYAUTOGUI_KEYS: frozenset[str] = frozenset(
    set(string.ascii_lowercase + string.digits + string.punctuation)
    | set(
        """
        enter return tab space backspace delete del insert escape esc home end pageup pagedown
        pgup pgdn up down left right shift shiftleft shiftright ctrl ctrlleft ctrlright alt
        altleft altright win winleft winright command option capslock numlock scrolllock
        printscreen prtsc pause apps f1 f2 f3 f4 f5 f6 f7 f8 f9 f10 f11 f12
        volumemute volumeup volumedown
        """.split()
    )
)
# Spellings models use for keys pyautogui names otherwise.
_KEY_ALIASES = {
    "control": "ctrl",
    "cmd": "command",
    "meta": "win",
    "super": "win",
    "arrowup": "up",
    "arrowdown": "down",
    "arrowleft": "left",
    "arrowright": "right",
    "page_up": "pageup",
    "page_down": "pagedown",
    "spacebar": "space",
    "caps_lock": "capslock",
    " ": "space",
}
# Characters ``write`` may type: printable text, newlines and tabs (each a key press).
_TYPABLE = frozenset(string.printable) - frozenset("\x0b\x0c\r")


class RenderRefused(OwnloopError):
    """An action the desktop will not carry out (its arguments are not what a call may take)."""


def _key(name: str) -> str:
    folded = name.strip().lower() if len(name) > 1 else name.lower()
    folded = _KEY_ALIASES.get(folded, folded)
    if folded not in PYAUTOGUI_KEYS:
        raise RenderRefused(f"unknown key {name[:40]!r}")
    return folded


def _point(
    x: float, y: float, screen: tuple[int, int]
) -> tuple[int, int, tuple[float, float] | None]:
    if not (math.isfinite(x) and math.isfinite(y)):
        raise RenderRefused(f"point ({x}, {y}) is not a number")
    width, height = screen
    px = min(max(round(x), 0), width - 1)
    py = min(max(round(y), 0), height - 1)
    asked = None if (px, py) == (round(x), round(y)) else (float(x), float(y))
    return px, py, asked


def _at(
    fn: str, x: float, y: float, screen: tuple[int, int], *, button: str = "", clicks: int = 0
) -> DesktopCall:
    px, py, asked = _point(x, y, screen)
    return DesktopCall(fn=fn, x=px, y=py, button=button, clicks=clicks, clamped=asked)


def desktop_ops(action: Action, screen: tuple[int, int]) -> tuple[Op, ...]:
    """The desktop operations of one action on a screen of ``screen`` pixels.

    Browser-only actions (visit a URL, web search, back, memorize) and the ending actions
    (finish, call user, fail, a rejected call) have none.

    Raises:
        RenderRefused: text that cannot be typed, an unknown key, a point that is not a number.
    """
    if isinstance(action, Click):
        return (
            _at("click", action.x, action.y, screen, button=action.button, clicks=action.count),
        )
    if isinstance(action, Move):
        return (_at("moveTo", action.x, action.y, screen),)
    if isinstance(action, Drag):
        return (
            _at("moveTo", action.x, action.y, screen),
            _at("dragTo", action.x2, action.y2, screen),
        )
    if isinstance(action, ButtonDown | ButtonUp):
        fn = "mouseDown" if isinstance(action, ButtonDown) else "mouseUp"
        if action.x is None or action.y is None:
            return (DesktopCall(fn=fn, button=action.button),)
        return (_at(fn, action.x, action.y, screen, button=action.button),)
    if isinstance(action, Scroll):
        return (_scroll(action, screen),)
    if isinstance(action, TypeText):
        return (DesktopCall(fn="write", text=_typable(action.text)),)
    if isinstance(action, Hotkey):
        keys = tuple(_key(k) for k in action.keys)
        if not keys:
            raise RenderRefused("a hotkey needs a key")
        return (DesktopCall(fn="press" if len(keys) == 1 else "hotkey", keys=keys),)
    if isinstance(action, KeyDown | KeyUp):
        fn = "keyDown" if isinstance(action, KeyDown) else "keyUp"
        return (DesktopCall(fn=fn, keys=(_key(action.key),)),)
    if isinstance(action, Wait):
        return (Sleep(seconds=min(max(action.seconds, 0.0), _MAX_WAIT_S)),)
    return ()


def _scroll(action: Scroll, screen: tuple[int, int]) -> DesktopCall:
    notches = action.amount if action.unit == "notch" else action.amount / 100.0
    if not math.isfinite(notches):
        raise RenderRefused("scroll amount is not a number")
    clicks = max(1, min(round(abs(notches)), 100))
    fn = "scroll" if action.direction in ("up", "down") else "hscroll"
    signed = clicks if action.direction in ("up", "right") else -clicks
    if action.x is None or action.y is None:
        return DesktopCall(fn=fn, clicks=signed)
    return _at(fn, action.x, action.y, screen, clicks=signed)


def _typable(text: str) -> str:
    if not isinstance(text, str):
        raise RenderRefused("text to type is not a string")
    if len(text) > MAX_TEXT:
        raise RenderRefused(f"text to type is {len(text)} characters, over {MAX_TEXT}")
    bad = sorted({c for c in text if c not in _TYPABLE})
    if bad:
        raise RenderRefused(f"text to type has characters a keyboard cannot type: {bad[:5]!r}")
    return text


def render(call: DesktopCall, screen: tuple[int, int]) -> str:
    """The one pyautogui call ``call`` stands for, checked again (a recorded call, too).

    Raises:
        RenderRefused: a function outside the whitelist, or arguments it may not take.
    """
    if call.fn not in _FUNCTIONS:
        raise RenderRefused(f"pyautogui.{call.fn[:40]} is not an operation ownloop sends")
    if call.button and call.button not in _BUTTONS:
        raise RenderRefused(f"unknown mouse button {call.button[:20]!r}")
    args: list[str] = []
    if call.x is not None and call.y is not None:
        width, height = screen
        if not (0 <= call.x < width and 0 <= call.y < height):
            raise RenderRefused(f"point ({call.x}, {call.y}) is off the {width}x{height} screen")
        args += [f"x={int(call.x)}", f"y={int(call.y)}"]
    if call.fn in ("scroll", "hscroll"):
        args.insert(0, f"clicks={int(call.clicks)}")
    elif call.fn == "click":
        args.append(f"clicks={max(1, min(int(call.clicks) or 1, 3))}")
    if call.button:
        args.append(f"button={call.button!r}")
    if call.fn == "dragTo":
        args.append("duration=0.5")
    if call.fn == "write":
        args = [repr(_typable(call.text)), "interval=0.01"]
    if call.fn in ("press", "hotkey", "keyDown", "keyUp"):
        keys = [_key(k) for k in call.keys]
        if not keys or (call.fn != "hotkey" and len(keys) != 1):
            raise RenderRefused(
                f"pyautogui.{call.fn} takes {'keys' if call.fn == 'hotkey' else 'one key'}"
            )
        args = [repr(k) for k in keys]
    return f"pyautogui.{call.fn}({', '.join(args)})"
