"""Where an agent differs from its model's released loop, and why: one row per agent and
behaviour, the single source of ``ownloop agents NAME`` and of the README table "Deviations from
the released loops" (a test keeps the README equal to these rows).

A row's ``default`` says what ownloop does unless told otherwise; ``option`` names the
``-o KEY=VALUE`` that switches to the other behaviour ("" when there is none: a released bug that
ownloop does not reproduce).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEVIATIONS", "Deviation", "deviations_of"]


class Deviation(NamedTuple):
    agent: str
    behaviour: str
    released: str  # what the released code does
    default: str  # what ownloop does by default
    option: str  # the option that flips it, or ""
    why: str


_ROWS: tuple[Deviation, ...] = (
    Deviation(
        "fara7b",
        "tool description and property descriptions in the system message",
        "microsoft/fara's own wording (the computer-use tool's description and parameters in "
        "`src/fara/_prompts.py`)",
        "read from the clone given by `--released` (the file is parsed, never run); without a "
        "clone, ownloop's own wording with the same actions, names, types and enums; "
        "`runs.prompt_source` says which",
        "`--released PATH` (a clone)",
        "the released text is not copied into ownloop; a run with a clone sends exactly what "
        "the released client sends",
    ),
    Deviation(
        "fara7b",
        "screenshot sent to the model",
        "resized by the client to the model's size (smart_resize: 1428x896 for a 1440x900 page)",
        "the same: the sent image is a resized blob referenced by the request, the recorded "
        "screenshot stays the original, coordinates map from 1428x896 to the page",
        "`resize_screenshot=false` sends the original and leaves the resize to the server",
        "the model is shown what the released client shows it",
    ),
    Deviation(
        "fara7b",
        "`type` without `text`",
        '`str(args.get("text"))` types the word `None` (then Enter unless `press_enter` is false)',
        "the same: types `None`",
        "`type_none=false` makes the response a parse error",
        "the schema requires text and training always gives it, so there is no other intent to "
        "honour; the episode goes on as released",
    ),
    Deviation(
        "fara7b",
        '`key` with `"/"`',
        'mapped to the key name "Divide", which Playwright does not know: the action fails',
        "presses `/`",
        "",
        "a released bug: the model means the slash",
    ),
    Deviation(
        "molmoweb",
        "a response that is not JSON, or JSON followed by extra text",
        'turned into `report_infeasible` ("Unparseable model output: ..."): nothing happens, '
        "the episode goes on, no retry",
        "the same: a no-op, and the next prompt shows the step as the released agent keeps it",
        "`resample_non_json=true` makes it a parse error, re-sampled (`calls_per_step`)",
        "a re-sample gives the model a second draw the released loop does not give it",
    ),
    Deviation(
        "molmoweb",
        '`click` with `button: "right"` or `"middle"`',
        "the executor always left-clicks (`page.mouse.click(x, y)`, no button)",
        "a left click",
        "`honour_button=true` clicks with the named button",
        "the released executor ignores the field",
    ),
    Deviation(
        "opencua",
        "a point with both numbers in [0, 1], e.g. `click(x=1, y=1)`",
        "OSWorld's qwen25 projection reads it as a fraction of the screen (`round(x*W)`): the "
        "bottom-right corner for (1, 1)",
        "the same: a fraction of the page, clamped to the last pixel (1919x1079 for 1920x1080)",
        "`fractions=false` reads it as model pixels like every other point ((1, 1) is the "
        "top-left pixel)",
        "OSWorld's rule is deliberate and the published 7B scores come from it; no target sits "
        "in the top-left 2x2 pixels, while a 7B that slips into relative coordinates is rescued "
        "by the fraction reading",
    ),
    Deviation(
        "opencua",
        "`pyautogui.hotkey(keys=[...])`",
        "`pyautogui.hotkey(*args)` gets no positional keys and presses nothing",
        "presses the listed keys together",
        "",
        "a released bug: AgentNet's training data writes `hotkey(keys=[...])` and means the keys",
    ),
    Deviation(
        "uitars",
        "`')` inside typed text, e.g. `type(content='f(x)')` with a quote before the bracket",
        "the package's non-greedy `type\\(content='(.*?)'\\)` regex ends the text at the first "
        "`')`: the rest is cut off",
        "types the whole text (the action's last `')` ends it)",
        "",
        "a released bug: the model wrote the whole text",
    ),
    Deviation(
        "uitars",
        "`press(key=...)`",
        "the package's pyautogui code is `keyDown` only: the key is never released",
        "presses and releases the key",
        "",
        "a released bug: a key held down changes every later key and click",
    ),
)

_DESKTOP: tuple[Deviation, ...] = (
    # On the desktop world (``--suite osworld:DIR --desktop URL``).
    Deviation(
        "fara7b",
        "on a desktop",
        "a web agent: its released loop drives a browser (visit_url, web_search, history_back)",
        "refused before the run starts with one line: record it in the browser",
        "none (web agents stay in the browser)",
        "half its actions have no desktop meaning, and a session of refused effects measures "
        "nothing; a refusal costs no desktop",
    ),
    Deviation(
        "molmoweb",
        "on a desktop",
        "a web agent: its released loop drives a browser (goto, search, back)",
        "refused before the run starts with one line: record it in the browser",
        "none (web agents stay in the browser)",
        "as for fara7b: its browser-only actions have no desktop meaning",
    ),
    Deviation(
        "uitars",
        "`type(content=...)` on a desktop",
        "OSWorld renders it as a clipboard copy and Ctrl+V",
        "typed as keystrokes (`pyautogui.write`)",
        "none (the desktop world)",
        "a paste never reaches xterm, and with xclip each copy hung the server for 120 s",
    ),
    Deviation(
        "uitars",
        "`call_user()` on a desktop",
        "its OSWorld loop reads a call to the user as FAIL",
        "the same: the session ends `call_user`, and the osworld grader reads it as FAIL "
        "(`infeasible` passes)",
        "none (the desktop world)",
        "UI-TARS has no fail action of its own",
    ),
    Deviation(
        "opencua",
        "pyautogui code on a desktop",
        "its OSWorld loop sends the model's code to the VM to run",
        "the code is read into actions (the whitelist interpreter), and each action is sent "
        "as one literal pyautogui call rendered by ownloop",
        "none (the desktop world)",
        "model text never reaches the guest as code",
    ),
)


def _grouped(rows: tuple[Deviation, ...]) -> tuple[Deviation, ...]:
    order = list(dict.fromkeys(row.agent for row in rows))
    return tuple(sorted(rows, key=lambda row: order.index(row.agent)))


DEVIATIONS: tuple[Deviation, ...] = _grouped(_ROWS + _DESKTOP)
"""Every documented deviation, grouped by agent."""


def deviations_of(agent: str) -> tuple[Deviation, ...]:
    """The rows of one agent."""
    return tuple(row for row in DEVIATIONS if row.agent == agent)
