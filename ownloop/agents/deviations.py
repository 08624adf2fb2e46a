"""Where an agent differs from its model's released loop, and why: one row per agent and
behaviour, the single source of ``ownloop agents NAME`` and of the table "Deviations from
the released loops" in docs/agents.md (a test keeps the page equal to these rows).

A row's ``default`` says what ownloop does unless told otherwise; ``option`` names the
``-o KEY=VALUE`` that switches to the other behaviour ("" when there is none: a released bug that
ownloop does not reproduce).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEVIATIONS", "RELEASED_COMMITS", "Deviation", "deviations_of"]


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
        "all",
        "a point the model wrote off the page",
        "the released loops send it to the browser or the X server as it is: Chromium delivers a "
        "click outside the page to `<html>`, which blurs the focused input",
        "the same for the browser: the point is moved just outside the page's edge (1 px) and "
        "clicked there, so Chromium does what it does with the model's own point",
        "`off_page=reject` records a no-op that hits nothing",
        "a coordinate such as 1e308 is not sent to a browser; what the page sees is Chromium's",
    ),
    Deviation(
        "all",
        "the task as the model reads it",
        "the released loops pass the task text bare",
        'wrapped: "You are interacting with a web application at URL. Your task: ..." (the '
        "seed harness's wording; the scripted experts find the task and its start URL in it)",
        "`task_text=bare` passes the task alone",
        "a recorded run keeps the wording it was recorded with (`runs.agent_settings`)",
    ),
    Deviation(
        "fara7b",
        "`key` with `control`, `Return` and other names outside the released key map",
        "passed to Playwright as written (lower-cased): `control` and `return` are no Playwright "
        "keys, and the action fails",
        "`control` presses Control, `Return` presses Enter (the shared key table)",
        "",
        "a released gap: the model means the key",
    ),
    Deviation(
        "fara7b",
        '`keys` given as one string, e.g. `"keys": "Enter"`',
        "the released controller iterates it and presses E, n, t, e, r",
        "presses the one key named",
        "",
        "a released bug: the model names one key",
    ),
    Deviation(
        "fara7b",
        "`web_search` and a `visit_url` with a space",
        "Bing (`https://www.bing.com/search?q=...&FORM=QBLH`)",
        "the same",
        "`search_url=...` sends the query elsewhere (a local test site)",
        "tests and offline runs cannot reach Bing",
    ),
    Deviation(
        "molmoweb",
        "`browser_nav` with `tab_focus`",
        "focuses the tab of that index",
        "a `Rejected` no-op: ownloop shows the model one tab, the newest",
        "",
        "ownloop follows the newest tab and has no tab-switch operation",
    ),
    Deviation(
        "molmoweb",
        "`browser_nav` with `new_tab`",
        "opens a new blank page and makes it the current one",
        "goes to `about:blank` in the current tab",
        "",
        "the model sees the same blank page; ownloop records one tab per session",
    ),
    Deviation(
        "opencua",
        "non-ASCII text in `pyautogui.write`",
        "pyautogui on the released X11 VM types only the characters it has keys for: the rest "
        "is dropped",
        "types every character (Playwright's `keyboard.type`)",
        "",
        "the model wrote the text; the drop is the X11 keyboard's, not the model's",
    ),
    Deviation(
        "opencua",
        "X11 key names pyautogui does not know (e.g. `cmd`, `command`, `super`)",
        "pyautogui on X11 presses nothing for a name it does not know",
        "mapped through the shared key table (`cmd` is Meta); a name no table knows is a parse "
        "error, re-sampled",
        "",
        "the model means the key; an unknown key would otherwise be a silent no-op",
    ),
    Deviation(
        "opencua",
        "`computer.triple_click(x, y)`, `scroll(x=, y=)` and `mouseDown`/`mouseUp` points",
        "OSWorld projects only click-like calls, moveTo and dragTo: these points are used as "
        "screen pixels unprojected",
        "every point is projected from the model's space",
        "",
        "a released gap: the model wrote every point in one space",
    ),
    Deviation(
        "opencua",
        "`pyautogui.scroll(-5, x=..., y=...)`",
        "the projection rebuilds the call without its positional amount",
        "scrolls 5 notches at the point",
        "",
        "a released bug: the amount is the model's",
    ),
    Deviation(
        "opencua",
        "a `)` inside a string, e.g. `pyautogui.write(message='f(x)')`",
        "the extraction regex `pyautogui\\.\\w+\\([^\\)]*\\)` cuts the call at the first `)`",
        "the whole call (an AST reads it)",
        "",
        "a released bug: the model wrote the whole text",
    ),
    Deviation(
        "opencua",
        "a statement outside the whitelist (e.g. `import os`, `subprocess.run(...)`)",
        "OSWorld runs the code block as Python on the VM",
        "the block stops there as `python -c` stops at a failing statement; a `Rejected` action "
        "records why",
        "",
        "ownloop never runs model text",
    ),
    Deviation(
        "opencua",
        "a block with nothing to do (only `pass` or imports)",
        "ends the episode with no action",
        "a zero-second wait; the episode goes on",
        "",
        "the released loop would have gone on to the next step had the code done nothing",
    ),
    Deviation(
        "uitars",
        "`scroll(direction='left')` / `'right'`",
        "the package's pyautogui code handles only up and down: left and right do nothing",
        "scrolls horizontally",
        "",
        "a released gap: the model asked for a horizontal scroll",
    ),
    Deviation(
        "uitars",
        "box tokens left in, square boxes `[x1, y1, x2, y2]`, `Action:` followed by a newline",
        "the package fails to read them (its regexes and its split on `Action: `)",
        "repaired before the package reads the text",
        "",
        "the model's intent is plain; a re-sample would cost a call for a formatting slip",
    ),
    Deviation(
        "uitars",
        "two actions on one line, e.g. `click(...) type(...)`",
        "the package reads the line as one `type` of the whole line and pastes it",
        "a parse error, re-sampled",
        "",
        "typing the model's own action text into the page is never what it meant",
    ),
    Deviation(
        "uitars",
        "a tab inside typed text",
        "pasted (input_swap): the tab goes into the field",
        "the same: the tab is inserted as a character (`keyboard.insert_text`), the rest typed",
        "",
        "typed key by key a tab would move the focus",
    ),
    Deviation(
        "uitars",
        "typed text in general",
        "pasted through the clipboard (pyperclip + ctrl+v, `input_swap=True`)",
        "typed key by key (Playwright's `keyboard.type`), but for tabs",
        "",
        "key events are what pages listen to; the text that arrives is the same",
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
        "the system prompt and the instruction",
        "built inside `Qwen3VLAgent.predict()` (OSWorld's `mm_agents/qwen3vl_agent.py`); "
        "EvoCUA's S2 prompt is constants in `mm_agents/evocua/prompts.py`",
        "read from the clone given by `--released` (the string literals `predict()` assigns, "
        "never run; the tool's property descriptions and its action enum, which offers the "
        "Qwen cookbook's full list, are ownloop's); without a clone, ownloop's own wording",
        "`--released PATH`; `prompt=evocua` for EvoCUA's",
        "no released text is copied into ownloop",
    ),
    Deviation(
        "holo",
        "the navigation prompt and the thinking switch",
        "H Company's demo builds its prompt from the pydantic schema of `NavigationStep`; "
        "thinking is switched by the chat template (`enable_thinking`)",
        "ownloop's own prompt stating the same schema; `thinking=true` asks for a think block "
        "in the prompt too, and every request sends the switch as the chat template takes it "
        '(`chat_template_kwargs: {"enable_thinking": ...}`)',
        "`thinking=true`; `thinking_switch=thinking` for vLLM's holo2 parser",
        "no released text is copied; the prompt also states the switch",
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

_PLAIN: tuple[Deviation, ...] = (
    Deviation(
        "pyautogui",
        "the system prompt",
        "mm_agents/prompts.py's SYS_PROMPT_IN_SCREENSHOT_OUT_CODE, with the VM's sudo password",
        "ownloop's own statement of the same output contract (fenced pyautogui code or WAIT, "
        "DONE, FAIL; pixels of the screenshot), no password",
        "",
        "no released text is copied into ownloop, and a recorder has no password to give",
    ),
    Deviation(
        "pyautogui",
        "a response with no code",
        "the step runs nothing and the next step asks again (with a new screenshot)",
        "re-sampled up to 3 times at temperature 1.0, then the session ends parse_error",
        "",
        "every agent of ownloop treats an unreadable answer the same way",
    ),
    Deviation(
        "pyautogui",
        "the code",
        "sent to the VM and run with python -c; a statement that fails stops the block",
        "read into actions by the whitelist interpreter (as opencua's); a statement outside it "
        "is recorded rejected and stops the block",
        "none (as opencua)",
        "model text is data: it never runs",
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
        "sampling and the prompt's language",
        "OSWorld's `uitars15_v1` loop sends `max_tokens` 1000 and `frequency_penalty` 1 and "
        "asks for thoughts in Chinese",
        "on a desktop the same; in the browser the user's runner (DESIGN §4): `max_tokens` 500, "
        "`frequency_penalty` 0, English",
        "`-o max_tokens=N -o frequency_penalty=F -o language=L` (a given option wins in both "
        "worlds)",
        "UI-TARS-1.5's desktop scores were published from OSWorld's loop; the browser runs are "
        "compared with runs made by the user's runner",
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


DEVIATIONS: tuple[Deviation, ...] = tuple(
    sorted(_ROWS + _PLAIN + _DESKTOP, key=lambda row: (row.agent != "all", row.agent))
)
"""Every documented deviation, grouped by agent (those of every agent first)."""


RELEASED_COMMITS: tuple[tuple[str, str], ...] = (
    ("uitars", "bytedance/UI-TARS @ 582f3a7 and the ui-tars 0.5.1 package"),
    (
        "opencua",
        "xlang-ai/OpenCUA @ 1d70f20; OSWorld's mm_agents/opencua (fork mrwwk/DeskCraft @ 3e11457)",
    ),
    ("fara7b", "microsoft/fara @ 3f3f1fd"),
    ("molmoweb", "allenai/molmoweb @ 6a841b4"),
    (
        "qwen3vl",
        "OSWorld's mm_agents/qwen3vl_agent.py and mm_agents/evocua/prompts.py "
        "(fork mrwwk/DeskCraft @ 4db5e46 and 4893b45)",
    ),
    ("holo", "H Company's Holo1.5 navigation demo: the NavigationStep schema and its actions"),
    ("glmv", "hud-evals/hud-python @ 0cbcd15, hud/tools/computer/glm.py"),
    (
        "pyautogui",
        "OSWorld's mm_agents/agent.py (PromptAgent, parse_code_from_string) and "
        "scripts/python/run_multienv.py (fork MMadmax/OSWorld-1.0 @ 5ee3b5a)",
    ),
)
"""The released code each agent's rows were checked against: the table is complete for it."""


def deviations_of(agent: str) -> tuple[Deviation, ...]:
    """The rows of one agent, those of every agent (``all``) first."""
    return tuple(row for row in DEVIATIONS if row.agent in ("all", agent))
