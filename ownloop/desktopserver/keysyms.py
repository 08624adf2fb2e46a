"""Key names as ownloop's whitelist reads them (Playwright's names) mapped to X keysym names.

``xdotool key`` takes X keysym names (``Return``, ``Control_L``, ``Prior``); the pyautogui
interpreter (``ownloop.agents.pyautogui``) gives keys as ``ownloop.agents.keys`` spells them,
which are Playwright's names (``Enter``, ``Control``, ``PageUp``) or one printable character.
"""

from __future__ import annotations

from ownloop.agents.keys import UnknownKeyError, to_playwright

__all__ = ["keysym"]

_NAMED: dict[str, str] = {
    "Enter": "Return",
    "NumpadEnter": "KP_Enter",
    "Tab": "Tab",
    "Escape": "Escape",
    "Backspace": "BackSpace",
    "Delete": "Delete",
    "Insert": "Insert",
    "Home": "Home",
    "End": "End",
    "PageUp": "Prior",
    "PageDown": "Next",
    "ArrowUp": "Up",
    "ArrowDown": "Down",
    "ArrowLeft": "Left",
    "ArrowRight": "Right",
    "Space": "space",
    "Control": "Control_L",
    "ControlLeft": "Control_L",
    "ControlRight": "Control_R",
    "ControlOrMeta": "Control_L",
    "Shift": "Shift_L",
    "ShiftLeft": "Shift_L",
    "ShiftRight": "Shift_R",
    "Alt": "Alt_L",
    "AltLeft": "Alt_L",
    "AltRight": "Alt_R",
    "AltGraph": "ISO_Level3_Shift",
    "Meta": "Super_L",
    "MetaLeft": "Super_L",
    "MetaRight": "Super_R",
    "CapsLock": "Caps_Lock",
    "NumLock": "Num_Lock",
    "ScrollLock": "Scroll_Lock",
    "Pause": "Pause",
    "PrintScreen": "Print",
    "ContextMenu": "Menu",
    "Clear": "Clear",
    "NumpadAdd": "KP_Add",
    "NumpadSubtract": "KP_Subtract",
    "NumpadMultiply": "KP_Multiply",
    "NumpadDivide": "KP_Divide",
    "NumpadDecimal": "KP_Decimal",
    "AudioVolumeUp": "XF86AudioRaiseVolume",
    "AudioVolumeDown": "XF86AudioLowerVolume",
    "AudioVolumeMute": "XF86AudioMute",
    "MediaPlayPause": "XF86AudioPlay",
    "MediaTrackNext": "XF86AudioNext",
    "MediaTrackPrevious": "XF86AudioPrev",
    "Backquote": "grave",
    "Minus": "minus",
    "Equal": "equal",
    "BracketLeft": "bracketleft",
    "BracketRight": "bracketright",
    "Backslash": "backslash",
    "Semicolon": "semicolon",
    "Quote": "apostrophe",
    "Comma": "comma",
    "Period": "period",
    "Slash": "slash",
    **{f"F{n}": f"F{n}" for n in range(1, 13)},
    **{f"Numpad{n}": f"KP_{n}" for n in range(10)},
    **{f"Digit{n}": str(n) for n in range(10)},
    **{f"Key{c}": c.lower() for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
}

# Printable ASCII punctuation, by keysym name (letters and digits are their own keysyms).
_PUNCTUATION: dict[str, str] = {
    "!": "exclam",
    '"': "quotedbl",
    "#": "numbersign",
    "$": "dollar",
    "%": "percent",
    "&": "ampersand",
    "'": "apostrophe",
    "(": "parenleft",
    ")": "parenright",
    "*": "asterisk",
    "+": "plus",
    ",": "comma",
    "-": "minus",
    ".": "period",
    "/": "slash",
    ":": "colon",
    ";": "semicolon",
    "<": "less",
    "=": "equal",
    ">": "greater",
    "?": "question",
    "@": "at",
    "[": "bracketleft",
    "\\": "backslash",
    "]": "bracketright",
    "^": "asciicircum",
    "_": "underscore",
    "`": "grave",
    "{": "braceleft",
    "|": "bar",
    "}": "braceright",
    "~": "asciitilde",
}


def keysym(name: str) -> str:
    """The X keysym name for a key as the interpreter gives it (``'ctrl'``, ``'Enter'``, ``'s'``).

    Raises:
        UnknownKeyError: a name no X keysym here stands for.
    """
    key = to_playwright(name)
    if len(key) == 1:
        if key.isascii() and key.isalnum():
            return key
        if key in _PUNCTUATION:
            return _PUNCTUATION[key]
        raise UnknownKeyError(f"no X keysym for {key!r}")
    if key in _NAMED:
        return _NAMED[key]
    raise UnknownKeyError(f"no X keysym for {key[:40]!r}")
