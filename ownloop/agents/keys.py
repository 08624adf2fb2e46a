"""Key names as models write them (pyautogui / xdotool style) mapped to Playwright's key names.

Every agent shares this table: UI-TARS writes ``hotkey(key='ctrl c')``, OpenCUA writes
``pyautogui.hotkey('ctrl', 'c')``, Fara writes ``keypress(["Control", "c"])``. All of them end as a
``keyboard.press("Control+c")`` whose names Playwright's US keyboard layout knows. A name that maps
to nothing is refused here, when the response is parsed, so that the agent can re-sample instead
of the browser failing one step later.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "PLAYWRIGHT_KEYS",
    "UnknownKeyError",
    "combo",
    "split_combo",
    "to_playwright",
]


class UnknownKeyError(ValueError):
    """A key name neither the alias table nor Playwright's keyboard layout knows."""


# Named keys of Playwright's USKeyboardLayout (playwright-core/src/server/usKeyboardLayout.ts):
# what keyboard.press / down / up accept besides single printable characters.
PLAYWRIGHT_KEYS: frozenset[str] = frozenset(
    """
    Alt AltGraph AltLeft AltRight ArrowDown ArrowLeft ArrowRight ArrowUp AudioVolumeDown
    AudioVolumeMute AudioVolumeUp Backquote Backslash Backspace BracketLeft BracketRight CapsLock
    Clear Comma ContextMenu Control ControlLeft ControlOrMeta ControlRight Delete Digit0 Digit1
    Digit2 Digit3 Digit4 Digit5 Digit6 Digit7 Digit8 Digit9 End Enter Equal Escape F1 F2 F3 F4 F5
    F6 F7 F8 F9 F10 F11 F12 Home Insert KeyA KeyB KeyC KeyD KeyE KeyF KeyG KeyH KeyI KeyJ KeyK
    KeyL KeyM KeyN KeyO KeyP KeyQ KeyR KeyS KeyT KeyU KeyV KeyW KeyX KeyY KeyZ MediaPlayPause
    MediaTrackNext MediaTrackPrevious Meta MetaLeft MetaRight Minus NumLock Numpad0 Numpad1
    Numpad2 Numpad3 Numpad4 Numpad5 Numpad6 Numpad7 Numpad8 Numpad9 NumpadAdd NumpadDecimal
    NumpadDivide NumpadEnter NumpadMultiply NumpadSubtract PageDown PageUp Pause Period
    PrintScreen Quote ScrollLock Semicolon Shift ShiftLeft ShiftRight Slash Space Tab
    """.split()
)

# Lower-case model spellings → Playwright names. Keys are compared lower-cased with "_" and "-"
# removed, so "page_down", "Page-Down" and "pagedown" are one entry.
_ALIASES: dict[str, str] = {
    "ctrl": "Control",
    "control": "Control",
    "ctl": "Control",
    "shift": "Shift",
    "alt": "Alt",
    "option": "Alt",
    "opt": "Alt",
    "altgr": "AltGraph",
    "cmd": "Meta",
    "command": "Meta",
    "win": "Meta",
    "windows": "Meta",
    "super": "Meta",
    "meta": "Meta",
    "esc": "Escape",
    "escape": "Escape",
    "enter": "Enter",
    "return": "Enter",
    "ret": "Enter",
    "tab": "Tab",
    "space": "Space",
    "spacebar": "Space",
    "backspace": "Backspace",
    "bksp": "Backspace",
    "delete": "Delete",
    "del": "Delete",
    "insert": "Insert",
    "ins": "Insert",
    "home": "Home",
    "end": "End",
    "pageup": "PageUp",
    "pgup": "PageUp",
    "pagedown": "PageDown",
    "pgdn": "PageDown",
    "pgdown": "PageDown",
    "up": "ArrowUp",
    "down": "ArrowDown",
    "left": "ArrowLeft",
    "right": "ArrowRight",
    "arrowup": "ArrowUp",
    "arrowdown": "ArrowDown",
    "arrowleft": "ArrowLeft",
    "arrowright": "ArrowRight",
    "capslock": "CapsLock",
    "numlock": "NumLock",
    "scrolllock": "ScrollLock",
    "printscreen": "PrintScreen",
    "prtsc": "PrintScreen",
    "prntscrn": "PrintScreen",
    "pause": "Pause",
    "menu": "ContextMenu",
    "apps": "ContextMenu",
    "contextmenu": "ContextMenu",
    "plus": "+",
    "minus": "-",
}
_ALIASES.update({f"f{n}": f"F{n}" for n in range(1, 13)})
_BY_FOLDED_NAME = {name.lower(): name for name in PLAYWRIGHT_KEYS}


def to_playwright(name: str) -> str:
    """The Playwright key name for one model key name.

    Args:
        name: A key as the model wrote it, e.g. ``"ctrl"``, ``"esc"``, ``"pagedown"``, ``"a"``.

    Returns:
        The name ``keyboard.press`` accepts, e.g. ``"Control"``, ``"Escape"``, ``"PageDown"``.
        A single printable ASCII character is returned as is (``"A"`` stays upper case).

    Raises:
        UnknownKeyError: the name is empty, not ASCII, or no key Playwright knows.
    """
    if len(name) == 1:
        if "!" <= name <= "~":
            return name
        if name == " ":
            return "Space"
        raise UnknownKeyError(f"unknown key {name!r}")
    folded = name.strip().lower().replace("_", "").replace("-", "")
    if folded in _ALIASES:
        return _ALIASES[folded]
    if folded in _BY_FOLDED_NAME:
        return _BY_FOLDED_NAME[folded]
    raise UnknownKeyError(f"unknown key {name[:40]!r}")


def split_combo(text: str) -> tuple[str, ...]:
    """Model key names in a combo string: ``"ctrl c"``, ``"ctrl+shift+t"`` or ``"ctrl + +"``.

    Keys are separated by whitespace; a ``+`` right after a name also separates (``"ctrl+c"``),
    and so does a ``+`` standing alone between names (``"ctrl + c"``). A ``+`` that is the last
    key, or the only one, is the plus key itself.
    """
    tokens = text.split()
    names: list[str] = []
    for i, token in enumerate(tokens):
        if token == "+" and 0 < i < len(tokens) - 1:
            continue
        if len(token) > 1 and "+" in token:
            names.extend(part for part in re.split(r"(?<=[^+])\+", token) if part)
        else:
            names.append(token)
    return tuple(names)


def combo(names: Iterable[str]) -> str:
    """One Playwright ``keyboard.press`` string for keys pressed together: ``"Control+c"``.

    Raises:
        UnknownKeyError: a name is unknown, or there is none.
    """
    keys = [to_playwright(name) for name in names]
    if not keys:
        raise UnknownKeyError("no key given")
    return "+".join(keys)
