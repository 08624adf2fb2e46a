"""Model key names → Playwright key names (shared by every agent)."""

from __future__ import annotations

import pytest

from ownloop.agents.keys import PLAYWRIGHT_KEYS, UnknownKeyError, combo, split_combo, to_playwright


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("ctrl", "Control"),
        ("control", "Control"),
        ("CTRL", "Control"),
        ("shift", "Shift"),
        ("alt", "Alt"),
        ("option", "Alt"),
        ("cmd", "Meta"),
        ("command", "Meta"),
        ("win", "Meta"),
        ("super", "Meta"),
        ("meta", "Meta"),
        ("esc", "Escape"),
        ("escape", "Escape"),
        ("enter", "Enter"),
        ("return", "Enter"),
        ("tab", "Tab"),
        ("space", "Space"),
        (" ", "Space"),
        ("backspace", "Backspace"),
        ("delete", "Delete"),
        ("del", "Delete"),
        ("insert", "Insert"),
        ("home", "Home"),
        ("end", "End"),
        ("pageup", "PageUp"),
        ("page_up", "PageUp"),
        ("pgup", "PageUp"),
        ("pagedown", "PageDown"),
        ("page-down", "PageDown"),
        ("pgdn", "PageDown"),
        ("up", "ArrowUp"),
        ("down", "ArrowDown"),
        ("left", "ArrowLeft"),
        ("right", "ArrowRight"),
        ("arrowup", "ArrowUp"),
        ("arrowdown", "ArrowDown"),
        ("arrowleft", "ArrowLeft"),
        ("ArrowRight", "ArrowRight"),
        ("f1", "F1"),
        ("F5", "F5"),
        ("f12", "F12"),
        ("capslock", "CapsLock"),
        ("printscreen", "PrintScreen"),
        ("menu", "ContextMenu"),
        ("a", "a"),
        ("A", "A"),
        ("1", "1"),
        ("/", "/"),
        ("+", "+"),
        ("plus", "+"),
        ("KeyA", "KeyA"),
        ("Digit1", "Digit1"),
        ("numpadenter", "NumpadEnter"),
    ],
)
def test_to_playwright(name: str, key: str) -> None:
    assert to_playwright(name) == key
    assert key in PLAYWRIGHT_KEYS or len(key) == 1


@pytest.mark.parametrize("name", ["", "hyper", "f13", "é", "\n", "ctrl c", "x" * 500])
def test_unknown_keys_are_refused(name: str) -> None:
    with pytest.raises(UnknownKeyError, match="unknown key"):
        to_playwright(name)


@pytest.mark.parametrize(
    ("text", "names", "press"),
    [
        ("ctrl c", ("ctrl", "c"), "Control+c"),
        ("ctrl+c", ("ctrl", "c"), "Control+c"),
        ("ctrl+shift+t", ("ctrl", "shift", "t"), "Control+Shift+t"),
        ("ctrl + c", ("ctrl", "c"), "Control+c"),
        ("ctrl++", ("ctrl", "+"), "Control++"),
        ("ctrl + +", ("ctrl", "+"), "Control++"),
        ("+", ("+",), "+"),
        ("  alt   f4 ", ("alt", "f4"), "Alt+F4"),
        ("cmd shift z", ("cmd", "shift", "z"), "Meta+Shift+z"),
    ],
)
def test_combos(text: str, names: tuple[str, ...], press: str) -> None:
    assert split_combo(text) == names
    assert combo(names) == press


def test_an_empty_combo_is_refused() -> None:
    with pytest.raises(UnknownKeyError, match="no key given"):
        combo(())
