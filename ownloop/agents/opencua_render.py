"""What OpenCUA would write for given actions: the inverse of ``OpenCuaAgent.parse``.

Used by the scripted expert (``ownloop serve-model --expert miniwob --agent opencua``) and the
round-trip tests. Page points become pixels of the model's smart_resize space, rounded; read back
through OSWorld's ``int(x / W' * W)`` they land within a pixel of where they started.
"""

from __future__ import annotations

from collections.abc import Sequence

from ownloop.agents.base import single_quoted
from ownloop.agents.coordinates import Size
from ownloop.store import events

__all__ = ["code_lines", "quote", "render_response"]

_CLICK_NAMES = {
    ("left", 1): "click",
    ("left", 2): "doubleClick",
    ("left", 3): "tripleClick",
    ("right", 1): "rightClick",
    ("middle", 1): "middleClick",
}


def render_response(
    thought: str, actions: Sequence[events.Action], image: Size, model: Size
) -> str:
    """``## Thought`` / ``## Action`` / ``## Code`` text for ``actions``.

    Raises:
        ValueError: an action this grammar cannot express (goto, memorize, ...), a terminate
            mixed with other actions, or a thought that would break the sections apart.
    """
    if not actions:
        raise ValueError("nothing to render: no actions")
    if "```" in thought or any(line.lstrip().startswith("##") for line in thought.splitlines()):
        raise ValueError("opencua cannot express a thought with ``` or a line starting '##'")
    ends = [a for a in actions if isinstance(a, events.Finish | events.Fail)]
    if ends and len(actions) > 1:
        raise ValueError("opencua's terminate is the whole step: it cannot follow other actions")
    if ends:
        fence, code = "code", _terminate(ends[0])
    else:
        fence, code = "python", code_lines(actions, image, model)
    return (
        f"## Thought:\n{thought.strip()}\n\n## Action:\n{_sentence(actions)}\n\n"
        f"## Code:\n```{fence}\n{code}\n```\n"
    )


def code_lines(
    actions: Sequence[events.Action], image: Size, model: Size, *, fractions: bool = True
) -> str:
    """The pyautogui calls for ``actions``, a line each, numbers in the model's space (with
    ``fractions``, a point that rounds into [0, 1] is written as a fraction of the page, as
    OpenCUA's projection reads such a point).

    Raises:
        ValueError: an action pyautogui cannot express.
    """
    return "\n".join(_call(a, image, model, fractions) for a in actions)


def quote(text: str, *, hide_fail: bool = False) -> str:
    """A single-quoted Python literal that reads back to ``text``.

    Backticks are escaped (a fence would end the code block); with ``hide_fail`` so is the 'f'
    of every "fail" (OSWorld classes a terminate block containing "fail" as FAIL).
    """
    if any(0xD800 <= ord(char) <= 0xDFFF for char in text):
        raise ValueError("opencua cannot express a lone surrogate")

    def hidden(index: int, char: str) -> bool:
        if char == "`":
            return True
        return hide_fail and char in "fF" and text[index : index + 4].lower() == "fail"

    return single_quoted(text, hidden)


def _terminate(action: events.Finish | events.Fail) -> str:
    if isinstance(action, events.Fail):
        return "computer.terminate(status='failure')"
    if action.answer is None:
        return "computer.terminate(status='success')"
    return f"computer.terminate(status='success', answer={quote(action.answer, hide_fail=True)})"


def _xy(x: float, y: float, image: Size, model: Size, fractions: bool = True) -> str:
    mx = round(x * model.width / image.width)
    my = round(y * model.height / image.height)
    if fractions and 0 <= mx <= 1 and 0 <= my <= 1:  # would read back as a fraction of the page
        return f"x={x / image.width!r}, y={y / image.height!r}"
    return f"x={mx}, y={my}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _call(action: events.Action, image: Size, model: Size, fractions: bool = True) -> str:
    def xy(x: float, y: float) -> str:
        return _xy(x, y, image, model, fractions)

    match action:
        case events.Click():
            name = _CLICK_NAMES.get((action.button, action.count))
            where = xy(action.x, action.y)
            if name is not None:
                return f"pyautogui.{name}({where})"
            return f"pyautogui.click({where}, clicks={action.count}, button='{action.button}')"
        case events.Move():
            return f"pyautogui.moveTo({xy(action.x, action.y)})"
        case events.Drag():
            return (
                f"pyautogui.moveTo({xy(action.x, action.y)})\n"
                f"pyautogui.dragTo({xy(action.x2, action.y2)}, "
                "button='left')"
            )
        case events.Scroll(unit="notch"):
            sign = 1 if action.direction in ("up", "right") else -1
            name = "hscroll" if action.direction in ("left", "right") else "scroll"
            clicks = _number(sign * action.amount)
            if action.x is None or action.y is None:
                return f"pyautogui.{name}({clicks})"
            return f"pyautogui.{name}({clicks}, {xy(action.x, action.y)})"
        case events.TypeText():
            return f"pyautogui.write(message={quote(action.text)})"
        case events.Hotkey(keys=(key,)):
            return f"pyautogui.press({quote(key)})"
        case events.Hotkey(keys=(str(), str(), *_)):
            return f"pyautogui.hotkey({', '.join(quote(k) for k in action.keys)})"
        case events.KeyDown() | events.KeyUp():
            name = "keyDown" if isinstance(action, events.KeyDown) else "keyUp"
            return f"pyautogui.{name}({quote(action.key)})"
        case events.Wait():
            return f"time.sleep({_number(action.seconds)})"
        case events.ButtonDown() | events.ButtonUp():
            name = "mouseDown" if isinstance(action, events.ButtonDown) else "mouseUp"
            if action.x is None or action.y is None:
                return f"pyautogui.{name}(button='{action.button}')"
            return f"pyautogui.{name}({xy(action.x, action.y)}, button='{action.button}')"
    raise ValueError(f"opencua cannot express this action: {type(action).__name__}")


def _sentence(actions: Sequence[events.Action]) -> str:
    """The '## Action:' sentence: one short description per action."""
    return " Then ".join(_describe(a) for a in actions).replace("`", "'")


def _describe(action: events.Action) -> str:
    match action:
        case events.Click():
            times = {1: "", 2: "Double-", 3: "Triple-"}.get(action.count, f"{action.count}x ")
            side = "" if action.button == "left" else f"{action.button}-"
            return f"{times}{side}click the target at the marked point.".capitalize()
        case events.TypeText():
            return f"Type {action.text!r}."
        case events.Hotkey():
            return f"Press {'+'.join(action.keys)}."
        case events.Scroll():
            return f"Scroll {action.direction}."
        case events.Finish():
            return "The task is done: terminate with success."
        case events.Fail():
            return "The task cannot be done: terminate with failure."
        case events.Wait():
            return "Wait."
    return f"{type(action).__name__}."
