"""The agent-neutral actions and the world operations that events carry, as frozen, tagged
msgspec Structs: an agent parses a response into ``Action`` values, and a world turns each into
``Op`` values (browser operations, or a rendered pyautogui call on a desktop). Tags are stored
data, as in :mod:`.events`, which imports these and is where they are read from.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = [
    "Frozen",
    "Action",
    "Back",
    "ButtonDown",
    "ButtonUp",
    "CallUser",
    "Click",
    "DesktopCall",
    "Drag",
    "Fail",
    "Finish",
    "Goto",
    "Hotkey",
    "KeyDown",
    "KeyUp",
    "KeyboardDown",
    "KeyboardPress",
    "KeyboardType",
    "KeyboardUp",
    "Memorize",
    "MouseClick",
    "MouseDown",
    "MouseMove",
    "MouseUp",
    "MouseWheel",
    "Move",
    "Op",
    "PageGoBack",
    "PageGoto",
    "Rejected",
    "Scroll",
    "Search",
    "Sleep",
    "TypeText",
    "Wait",
]


class Frozen(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A value inside an event: immutable, keyword-only, defaults left out of the encoding."""


# ---------------------------------------------------------------- agent-neutral actions
# Page coordinates (x, y) are CSS pixels of the viewport; model_x/model_y are what the model
# wrote, in its own coordinate space. ``raw`` is the action's text as the model wrote it.


class _ActionBase(Frozen, frozen=True, tag_field="kind"):
    raw: str = ""


class Click(_ActionBase, tag="click", frozen=True, kw_only=True):
    x: float
    y: float
    button: Literal["left", "right", "middle"] = "left"
    count: int = 1
    model_x: float | None = None
    model_y: float | None = None


class Move(_ActionBase, tag="move", frozen=True, kw_only=True):
    x: float
    y: float
    model_x: float | None = None
    model_y: float | None = None


class Drag(_ActionBase, tag="drag", frozen=True, kw_only=True):
    x: float
    y: float
    x2: float
    y2: float
    model_x: float | None = None
    model_y: float | None = None
    model_x2: float | None = None
    model_y2: float | None = None


class Scroll(_ActionBase, tag="scroll", frozen=True, kw_only=True):
    """Scroll ``amount`` units toward ``direction``, at (x, y) or at the pointer when None."""

    direction: Literal["up", "down", "left", "right"]
    amount: float = 1.0
    unit: Literal["notch", "px"] = "notch"
    x: float | None = None
    y: float | None = None
    model_x: float | None = None
    model_y: float | None = None


class TypeText(_ActionBase, tag="type", frozen=True, kw_only=True):
    text: str


class Hotkey(_ActionBase, tag="hotkey", frozen=True, kw_only=True):
    """Press keys together (model key names, e.g. ("ctrl", "c")); one key is a plain press."""

    keys: tuple[str, ...]


class KeyDown(_ActionBase, tag="key_down", frozen=True, kw_only=True):
    key: str


class KeyUp(_ActionBase, tag="key_up", frozen=True, kw_only=True):
    key: str


class Wait(_ActionBase, tag="wait", frozen=True, kw_only=True):
    seconds: float = 5.0


class Goto(_ActionBase, tag="goto", frozen=True, kw_only=True):
    url: str


class Search(_ActionBase, tag="search", frozen=True, kw_only=True):
    query: str


class Back(_ActionBase, tag="back", frozen=True, kw_only=True):
    pass


class Memorize(_ActionBase, tag="memorize", frozen=True, kw_only=True):
    fact: str


class Finish(_ActionBase, tag="finish", frozen=True, kw_only=True):
    answer: str | None = None


class CallUser(_ActionBase, tag="call_user", frozen=True, kw_only=True):
    text: str = ""


class Fail(_ActionBase, tag="fail", frozen=True, kw_only=True):
    reason: str = ""


class ButtonDown(_ActionBase, tag="button_down", frozen=True, kw_only=True):
    """Press a mouse button and hold it, at (x, y) or at the pointer when None (mouseDown)."""

    button: Literal["left", "right", "middle"] = "left"
    x: float | None = None
    y: float | None = None
    model_x: float | None = None
    model_y: float | None = None


class ButtonUp(_ActionBase, tag="button_up", frozen=True, kw_only=True):
    """Release a mouse button, at (x, y) or at the pointer when None (mouseUp)."""

    button: Literal["left", "right", "middle"] = "left"
    x: float | None = None
    y: float | None = None
    model_x: float | None = None
    model_y: float | None = None


class Rejected(_ActionBase, tag="rejected", frozen=True, kw_only=True):
    """Something the model asked for that the agent refused to do (e.g. a statement outside
    opencua's pyautogui whitelist). Nothing is done; it is kept so the refusal is on record."""

    reason: str = ""


Action = (
    Click
    | Move
    | Drag
    | Scroll
    | TypeText
    | Hotkey
    | KeyDown
    | KeyUp
    | Wait
    | Goto
    | Search
    | Back
    | Memorize
    | Finish
    | CallUser
    | Fail
    | ButtonDown
    | ButtonUp
    | Rejected
)

# ---------------------------------------------------------------- browser operations
# The Playwright primitives a translation produced, replayable exactly.


class _OpBase(Frozen, frozen=True, tag_field="op"):
    pass


class MouseClick(_OpBase, tag="mouse.click", frozen=True, kw_only=True):
    x: float
    y: float
    button: Literal["left", "right", "middle"] = "left"
    click_count: int = 1


class MouseMove(_OpBase, tag="mouse.move", frozen=True, kw_only=True):
    x: float
    y: float
    steps: int = 1


class MouseDown(_OpBase, tag="mouse.down", frozen=True, kw_only=True):
    button: Literal["left", "right", "middle"] = "left"


class MouseUp(_OpBase, tag="mouse.up", frozen=True, kw_only=True):
    button: Literal["left", "right", "middle"] = "left"


class MouseWheel(_OpBase, tag="mouse.wheel", frozen=True, kw_only=True):
    dx: float = 0.0
    dy: float = 0.0


class KeyboardType(_OpBase, tag="keyboard.type", frozen=True, kw_only=True):
    text: str
    # True: the text goes in as one input, as a paste does (keyboard.insert_text): a tab in it is
    # a character, not a focus move. False: typed key by key (keyboard.type).
    paste: bool = False


class KeyboardPress(_OpBase, tag="keyboard.press", frozen=True, kw_only=True):
    key: str  # Playwright key or combo, e.g. "Control+a"


class KeyboardDown(_OpBase, tag="keyboard.down", frozen=True, kw_only=True):
    key: str


class KeyboardUp(_OpBase, tag="keyboard.up", frozen=True, kw_only=True):
    key: str


class PageGoto(_OpBase, tag="page.goto", frozen=True, kw_only=True):
    url: str


class PageGoBack(_OpBase, tag="page.go_back", frozen=True, kw_only=True):
    pass


class Sleep(_OpBase, tag="sleep", frozen=True, kw_only=True):
    seconds: float


class DesktopCall(_OpBase, tag="pyautogui", frozen=True, kw_only=True):
    """One pyautogui call on a desktop (``ownloop.world.render``): a whitelisted function and
    checked literal arguments. The code sent is rendered from these fields each time it is
    executed (a replay too), never read back from text."""

    fn: str  # click, doubleClick, rightClick, moveTo, dragTo, mouseDown, mouseUp, scroll, ...
    x: int | None = None  # screen pixels, inside the screen
    y: int | None = None
    button: str = ""  # left, right, middle ("" for pyautogui's default)
    clicks: int = 0  # scroll amount (notches), or click count for click
    text: str = ""  # write: the characters typed, as keystrokes
    keys: tuple[str, ...] = ()  # press / hotkey / keyDown / keyUp: pyautogui key names
    clamped: tuple[float, float] | None = None  # the off-screen point the action asked for


Op = (
    MouseClick
    | MouseMove
    | MouseDown
    | MouseUp
    | MouseWheel
    | KeyboardType
    | KeyboardPress
    | KeyboardDown
    | KeyboardUp
    | PageGoto
    | PageGoBack
    | Sleep
    | DesktopCall
)
