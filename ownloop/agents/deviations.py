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


DEVIATIONS: tuple[Deviation, ...] = (
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
        "OSWorld's qwen25 projection reads it as a fraction but multiplies by the smart_resize "
        "size (`round(x*W')`: 1932x1092 for a 1920x1080 screen, past its edge, where the X "
        "server keeps the pointer on the last pixel): the bottom-right corner for (1, 1)",
        "a fraction of the page's own size (`round(x*W)`), clamped to the last pixel "
        "(1919x1079 for 1920x1080): the same corner for (1, 1), a point up to 0.6% nearer the "
        "top-left elsewhere",
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
    Deviation(
        "qwen3vl",
        "a response without a readable `<tool_call>`",
        "OSWorld's parser logs the error and returns no code: the step does nothing and the "
        "episode goes on",
        "a parse error, re-sampled (`calls_per_step`)",
        "",
        "an empty step is recorded as a failure to act, never as a silent no-op",
    ),
    Deviation(
        "qwen3vl",
        "`terminate` with `status: failure`",
        "OSWorld maps every terminate to DONE, whatever the status",
        "ends the session as `fail`",
        "",
        "the model said it failed; the status is recorded as it said",
    ),
    Deviation(
        "qwen3vl",
        "`triple_click`, `hscroll`, `answer`",
        "OSWorld's qwen3vl parser has no branch for them: nothing happens (its prompt does not "
        "offer them; the Qwen cookbook's tool does)",
        "a triple click; a horizontal wheel; the answer is kept and ends the episode's answer "
        "at `terminate`",
        "",
        "the cookbook's action space is the model's; ownloop's prompt states it",
    ),
    Deviation(
        "qwen3vl",
        "`scroll` by a large `pixels`",
        "`pyautogui.scroll(pixels)`: that many wheel clicks",
        "at most 50 notches",
        "",
        "a scroll of -500 clicks would hold a worker for long and scroll nowhere new",
    ),
    Deviation(
        "qwen3vl",
        "the system prompt's prose",
        "built inside `Qwen3VLAgent.predict()` (OSWorld), no constant to read; EvoCUA's S2 "
        "prompt is constants in `mm_agents/evocua/prompts.py`",
        "ownloop's own wording of the same tool, actions and 1000x1000 frame; `prompt=evocua` "
        "reads EvoCUA's from the clone given by `--released`",
        "`--released PATH` with `prompt=evocua`",
        "no released text is copied into ownloop",
    ),
    Deviation(
        "holo",
        "the navigation prompt and the thinking switch",
        "H Company's demo builds its prompt from the pydantic schema of `NavigationStep`; "
        "thinking is switched by the chat template (`enable_thinking`)",
        "ownloop's own prompt stating the same schema; `thinking=true` asks for a think block "
        "in the prompt (the request carries no chat-template switch)",
        "`thinking=true`",
        "no released text is copied; ownloop's request has no chat-template field",
    ),
    Deviation(
        "holo",
        "`refresh` and `restart`",
        "reload the page; restart the episode at its first URL",
        "a parse error, re-sampled",
        "",
        "ownloop has no page-reload operation",
    ),
    Deviation(
        "glmv",
        "the system prompt",
        "zai-org/GLM-V's agent guide and hud-python's GLM tool describe the PC action space; no "
        "prompt constant to read",
        "ownloop's own statement of the same actions and 0-999 grid",
        "",
        "no released text is copied into ownloop",
    ),
    Deviation(
        "glmv",
        "`key(keys=...)` names",
        "hud-python lowercases and splits on `+`, then the executor presses them",
        "the same, and a name no keyboard knows is a parse error, re-sampled",
        "",
        "the browser would fail one step later on an unknown key",
    ),
)
"""Every documented deviation, grouped by agent."""


def deviations_of(agent: str) -> tuple[Deviation, ...]:
    """The rows of one agent."""
    return tuple(row for row in DEVIATIONS if row.agent == agent)
