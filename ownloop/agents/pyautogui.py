"""A whitelist interpreter of pyautogui code: model text in, agent-neutral actions out.

OpenCUA answers with a block of Python that OSWorld runs with ``python -c``. ownloop never runs
it: the block is parsed with ``ast.parse`` (which builds a tree and runs nothing) and this module
walks the tree, turning each allowed statement into actions. Allowed are

- calls with literal arguments (numbers, strings, booleans, None, lists/tuples of those) of
  ``pyautogui.`` click, doubleClick, tripleClick, rightClick, middleClick, moveTo, moveRel,
  dragTo, dragRel, mouseDown, mouseUp, scroll, hscroll, write, typewrite, press, hotkey, keyDown,
  keyUp and sleep, of ``time.sleep``, and of ``computer.triple_click``, ``computer.wait`` and
  ``computer.terminate``, with the keyword variants models write (``write(message=)``,
  ``write(text=)``, ``press(keys=[...])``, ``press(key=)``, ``hotkey(keys=[...])``,
  ``hotkey(key1=, key2=)``, ``button=``);
- ``import pyautogui`` / ``import time``, ``pass``;
- ``for _ in range(n)`` with literal bounds, at most 100 turns, not nested.

Anything else (other imports, names, attributes, lambdas, comprehensions, assignments, ``exec``,
dunder names, ...) is *refused*, statement by statement, the way ``python -c`` stops at the
first failing statement: the statements before it keep their actions, the refused one becomes a
``Rejected`` action carrying the reason, and nothing after it is looked at. A syntax error
anywhere refuses the whole block (``python -c`` compiles everything before running anything):
that raises ``CodeSyntaxError``. ``computer.wait`` and ``computer.terminate`` are not pyautogui:
OSWorld replaces the whole block with WAIT / DONE / FAIL when it contains them, so they come back
as ``Outcome.control`` and the caller decides.

The pointer is tracked as pyautogui tracks it: moveRel/dragRel are relative to it, a click
without x, y happens at it, scroll(x=, y=) moves it. The caller gives the position at the start
of the block (None when unknown). Without a known position a plain click or a mouseDown/mouseUp
acts wherever Playwright's mouse is (which follows the same moves); what needs the number itself
(moveRel, dragRel, a double click in place) is refused.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, Protocol

from ownloop.agents.base import clip
from ownloop.agents.coordinates import Point
from ownloop.agents.pyautogui_calls import (
    IGNORED,
    MODULES,
    PARAMS,
    RENAMES,
    Refused,
    check_name,
    describe_statement,
    range_length,
    read_button,
    read_callee,
    read_coordinate,
    read_count,
    read_key,
    read_literal,
    read_number,
)
from ownloop.store import events

__all__ = [
    "MAX_CODE_CHARS",
    "CodeSyntaxError",
    "Control",
    "Coordinates",
    "Limits",
    "Outcome",
    "interpret",
]

MAX_CODE_CHARS = 12_000
"""Longer blocks are refused before ``ast.parse`` sees them (2,048 tokens are ~8,000 chars)."""


class CodeSyntaxError(ValueError):
    """The block is not Python: nothing in it runs (as ``python -c`` would not run it)."""


class Limits(NamedTuple):
    loop_turns: int = 100  # turns of one for loop
    actions: int = 1000  # actions (and scroll notches, key presses) per block
    statements: int = 20_000  # statements executed per block, loops unrolled
    sleep_s: float = 60.0  # total seconds of sleep per block
    amount: int = 200  # clicks / notches / presses asked for in one call


class Coordinates(Protocol):
    """Model space → page space (CSS pixels)."""

    def point(self, x: float, y: float) -> Point:
        """A model point on the page."""
        ...

    def offset(self, dx: float, dy: float) -> Point:
        """A model distance (moveRel, dragRel) on the page."""
        ...


class Control(NamedTuple):
    """A ``computer.wait()`` or ``computer.terminate(...)`` call."""

    name: Literal["wait", "terminate"]
    status: object = None  # terminate's status= (any literal, as written)
    answer: object = None  # terminate's answer=
    raw: str = ""


class Outcome(NamedTuple):
    actions: tuple[events.Action, ...]
    rejected: str | None  # why interpretation stopped early; also the last action's reason
    control: Control | None  # the first computer.wait/terminate reached, if any
    pointer: Point | None  # where the pointer is after the block (None: unknown)


def interpret(
    code: str,
    coordinates: Coordinates,
    *,
    pointer: Point | None = None,
    limits: Limits | None = None,
) -> Outcome:
    """Interpret one code block.

    Args:
        code: the block's text.
        coordinates: maps the model's numbers to page pixels.
        pointer: the pointer's page position when the block starts (None: unknown).
        limits: work bounds (default ``Limits()``); going over one refuses the
            statement that does.

    Raises:
        CodeSyntaxError: the block is too long or is not Python (nothing is interpreted).
    """
    if len(code) > MAX_CODE_CHARS:
        raise CodeSyntaxError(
            f"code too long ({len(code)} characters; the limit is {MAX_CODE_CHARS})"
        )
    try:
        tree = ast.parse(code, mode="exec")
    except SyntaxError as error:
        raise CodeSyntaxError(f"not Python: {error.msg} (line {error.lineno})") from None
    except (ValueError, RecursionError, MemoryError, OverflowError) as error:
        raise CodeSyntaxError(f"not Python: {type(error).__name__}") from None
    run = _Run(code, coordinates, pointer, limits or Limits())
    try:
        run.block(tree.body, in_loop=False)
    except Refused as refusal:
        reason = str(refusal)
        run.actions.append(events.Rejected(reason=reason, raw=run.current))
        return Outcome(tuple(run.actions), reason, None, run.pointer)
    except _Stop:
        pass
    return Outcome(tuple(run.actions), None, run.control, run.pointer)


class _Stop(Exception):
    """computer.wait / computer.terminate reached: the rest of the block is not looked at."""


class _Run:
    def __init__(
        self, code: str, coordinates: Coordinates, pointer: Point | None, limits: Limits
    ) -> None:
        self.code, self.coordinates, self.pointer, self.limits = code, coordinates, pointer, limits
        self.actions: list[events.Action] = []
        self.control: Control | None = None
        self.current = ""
        self.cost = 0
        self.executed = 0
        self.slept = 0.0

    # ---------------------------------------------------------------- statements

    def block(self, body: list[ast.stmt], *, in_loop: bool) -> None:
        for statement in body:
            self.executed += 1
            self.current = clip(
                ast.get_source_segment(self.code, statement) or "", 200, escape=True
            )
            where = f"line {statement.lineno}"
            if self.executed > self.limits.statements:
                raise Refused(f"{where}: over {self.limits.statements} statements run")
            try:
                self.statement(statement, in_loop=in_loop)
            except Refused as refusal:
                message = str(refusal)
                if not message.startswith("line "):
                    message = f"{where}: {message}"
                raise Refused(message) from None

    def statement(self, node: ast.stmt, *, in_loop: bool) -> None:
        if isinstance(node, ast.Pass):
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in MODULES or alias.asname not in (None, alias.name):
                    raise Refused(
                        f"import {alias.name} is not allowed "
                        "(only import pyautogui and import time)"
                    )
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self.call(node.value)
            return
        if isinstance(node, ast.For):
            self.loop(node, in_loop=in_loop)
            return
        raise Refused(f"{describe_statement(node)} is not allowed")

    def loop(self, node: ast.For, *, in_loop: bool) -> None:
        if in_loop:
            raise Refused("a loop inside a loop is not allowed")
        if not isinstance(node.target, ast.Name) or node.orelse:
            raise Refused("only 'for NAME in range(n):' loops are allowed")
        check_name(node.target.id)
        turns = range_length(node.iter)
        if turns > self.limits.loop_turns:
            raise Refused(f"a loop of {turns} turns is over the limit of {self.limits.loop_turns}")
        for _ in range(turns):
            self.block(node.body, in_loop=True)

    # ---------------------------------------------------------------- calls

    def call(self, node: ast.Call) -> None:
        name = read_callee(node.func)
        args = self.bind(name, node)
        raw = clip(ast.get_source_segment(self.code, node) or name, 500, escape=True)
        if name in ("computer.wait", "computer.terminate"):
            self.control = Control(
                "wait" if name == "computer.wait" else "terminate",
                args.get("status"),
                args.get("answer"),
                raw,
            )
            raise _Stop
        short = name.removeprefix("pyautogui.")
        handler: Callable[[dict[str, Any], str], None] = getattr(
            self, f"_{short}".replace(".", "_")
        )
        handler(args, raw)

    def bind(self, name: str, node: ast.Call) -> dict[str, Any]:
        short = name.removeprefix("pyautogui.")
        if short == "hotkey":
            return self.bind_hotkey(node)
        params = PARAMS[short]
        renames = RENAMES.get(short, {})
        if len(node.args) > len(params):
            raise Refused(f"{name}() takes at most {len(params)} positional arguments")
        bound: dict[str, Any] = {}
        for param, value in zip(params, node.args, strict=False):
            bound[param] = read_literal(value)
        for keyword in node.keywords:
            if keyword.arg is None:
                raise Refused("** arguments are not allowed")
            check_name(keyword.arg)
            param = renames.get(keyword.arg, keyword.arg)
            if param not in params:
                raise Refused(f"{name}() has no argument {keyword.arg!r}")
            if param in bound:
                raise Refused(f"{name}() got {param!r} twice")
            bound[param] = read_literal(keyword.value)
        return bound

    def bind_hotkey(self, node: ast.Call) -> dict[str, Any]:
        keys: list[Any] = []
        for value in node.args:
            read = read_literal(value)
            keys.extend(read if isinstance(read, list) else [read])
        named: list[tuple[str, Any]] = []
        for keyword in node.keywords:
            if keyword.arg is None:
                raise Refused("** arguments are not allowed")
            check_name(keyword.arg)
            value = read_literal(keyword.value)
            if keyword.arg == "keys":
                keys.extend(value if isinstance(value, list) else [value])
            elif keyword.arg.startswith("key") and keyword.arg[3:].isdigit():
                named.append((keyword.arg, value))
            elif keyword.arg not in IGNORED:
                raise Refused(f"hotkey() has no argument {keyword.arg!r}")
        keys.extend(value for _, value in sorted(named, key=lambda kv: int(kv[0][3:])))
        return {"keys": keys}

    # ---------------------------------------------------------------- bookkeeping

    def spend(self, amount: int = 1) -> None:
        self.cost += amount
        if self.cost > self.limits.actions:
            raise Refused(f"over {self.limits.actions} actions in one block")

    def add(self, action: events.Action, cost: int = 1) -> None:
        self.spend(cost)
        self.actions.append(action)

    def where(self, args: dict[str, Any], name: str) -> tuple[Point, Point] | None:
        """(page, model) of the call's x, y; None when both are absent."""
        x, y = args.get("x"), args.get("y")
        if isinstance(x, list) and y is None:  # pyautogui.click((x, y))
            if len(x) != 2:
                raise Refused(f"{name}() needs a point (x, y)")
            x, y = x
        if x is None and y is None:
            return None
        if x is None or y is None:
            raise Refused(f"{name}() needs both x and y")
        mx, my = read_coordinate(x, "x"), read_coordinate(y, "y")
        page = self.coordinates.point(mx, my)
        return page, Point(mx, my)

    def here(self, name: str) -> Point:
        if self.pointer is None:
            raise Refused(
                f"{name}() needs the pointer position, which is unknown here "
                "(no earlier move in this block or the history)"
            )
        return self.pointer

    # ---------------------------------------------------------------- pyautogui

    def _clicks(
        self, args: dict[str, Any], raw: str, name: str, count: int, button: str | None
    ) -> None:
        button = read_button(args.get("button", "left")) if button is None else button
        at = self.where(args, name)
        if count == 0:
            if at is not None:
                self.add(
                    events.Move(x=at[0].x, y=at[0].y, model_x=at[1].x, model_y=at[1].y, raw=raw)
                )
                self.pointer = at[0]
            return
        btn: Any = button
        if at is not None:
            self.pointer = at[0]
            self.add(
                events.Click(
                    x=at[0].x,
                    y=at[0].y,
                    button=btn,
                    count=count,
                    model_x=at[1].x,
                    model_y=at[1].y,
                    raw=raw,
                ),
                count,
            )
        elif self.pointer is not None:
            self.add(
                events.Click(x=self.pointer.x, y=self.pointer.y, button=btn, count=count, raw=raw),
                count,
            )
        elif count == 1:  # in place, wherever Playwright's mouse is
            self.add(events.ButtonDown(button=btn, raw=raw))
            self.add(events.ButtonUp(button=btn, raw=raw))
        else:
            self.here(name)

    def _click(self, args: dict[str, Any], raw: str) -> None:
        count = read_count(args.get("clicks", 1), "clicks", self.limits.amount)
        self._clicks(args, raw, "click", count, None)

    def _doubleClick(self, args: dict[str, Any], raw: str) -> None:  # noqa: N802
        self._clicks(args, raw, "doubleClick", 2, None)

    def _tripleClick(self, args: dict[str, Any], raw: str) -> None:  # noqa: N802
        self._clicks(args, raw, "tripleClick", 3, None)

    def _computer_triple_click(self, args: dict[str, Any], raw: str) -> None:
        if self.where(args, "computer.triple_click") is None:
            raise Refused("computer.triple_click() needs x and y")
        self._clicks(args, raw, "computer.triple_click", 3, "left")

    def _rightClick(self, args: dict[str, Any], raw: str) -> None:  # noqa: N802
        self._clicks(args, raw, "rightClick", 1, "right")

    def _middleClick(self, args: dict[str, Any], raw: str) -> None:  # noqa: N802
        self._clicks(args, raw, "middleClick", 1, "middle")

    def _moveTo(self, args: dict[str, Any], raw: str) -> None:  # noqa: N802
        at = self.where(args, "moveTo")
        if at is None:
            return  # pyautogui.moveTo() stays where it is
        self.add(events.Move(x=at[0].x, y=at[0].y, model_x=at[1].x, model_y=at[1].y, raw=raw))
        self.pointer = at[0]

    def _moveRel(self, args: dict[str, Any], raw: str) -> None:  # noqa: N802
        target = self.relative(args, "moveRel")
        self.add(events.Move(x=target.x, y=target.y, raw=raw))
        self.pointer = target

    def relative(self, args: dict[str, Any], name: str) -> Point:
        dx, dy = args.get("xOffset", 0), args.get("yOffset", 0)
        if isinstance(dx, list) and "yOffset" not in args and len(dx) == 2:
            dx, dy = dx
        delta = self.coordinates.offset(
            read_coordinate(dx or 0, "xOffset"), read_coordinate(dy or 0, "yOffset")
        )
        start = self.here(name)
        return Point(start.x + delta.x, start.y + delta.y)

    def _dragTo(self, args: dict[str, Any], raw: str) -> None:  # noqa: N802
        at = self.where(args, "dragTo")
        if at is None:
            raise Refused("dragTo() needs x and y")
        self.drag(at[0], at[1], args, raw)

    def _dragRel(self, args: dict[str, Any], raw: str) -> None:  # noqa: N802
        self.drag(self.relative(args, "dragRel"), None, args, raw)

    def drag(self, to: Point, model: Point | None, args: dict[str, Any], raw: str) -> None:
        button: Any = read_button(args.get("button", "left"))
        mx, my = (model.x, model.y) if model else (None, None)
        if args.get("mouseDownUp", True) is False:
            self.add(events.Move(x=to.x, y=to.y, model_x=mx, model_y=my, raw=raw))
        elif self.pointer is not None and button == "left":
            self.add(
                events.Drag(
                    x=self.pointer.x,
                    y=self.pointer.y,
                    x2=to.x,
                    y2=to.y,
                    model_x2=mx,
                    model_y2=my,
                    raw=raw,
                )
            )
        else:  # from wherever the pointer is, with any button
            self.add(events.ButtonDown(button=button, raw=raw))
            self.add(events.Move(x=to.x, y=to.y, model_x=mx, model_y=my, raw=raw))
            self.add(events.ButtonUp(button=button, raw=raw))
        self.pointer = to

    def _button_action(self, args: dict[str, Any], raw: str, name: str, down: bool) -> None:
        button: Any = read_button(args.get("button", "left"))
        at = self.where(args, name)
        kind = events.ButtonDown if down else events.ButtonUp
        if at is None:
            here = self.pointer
            self.add(
                kind(button=button, x=here.x if here else None, y=here.y if here else None, raw=raw)
            )
            return
        self.add(
            kind(button=button, x=at[0].x, y=at[0].y, model_x=at[1].x, model_y=at[1].y, raw=raw)
        )
        self.pointer = at[0]

    def _mouseDown(self, args: dict[str, Any], raw: str) -> None:  # noqa: N802
        self._button_action(args, raw, "mouseDown", True)

    def _mouseUp(self, args: dict[str, Any], raw: str) -> None:  # noqa: N802
        self._button_action(args, raw, "mouseUp", False)

    def _wheel(self, args: dict[str, Any], raw: str, name: str, horizontal: bool) -> None:
        if "clicks" not in args:
            raise Refused(f"{name}() needs clicks")
        clicks = read_number(args["clicks"], "clicks")
        if abs(clicks) > self.limits.amount:
            raise Refused(
                f"{name}() of {clicks:g} clicks is over the limit of {self.limits.amount}"
            )
        at = self.where(args, name)
        if clicks == 0:
            if at is not None:
                self.add(
                    events.Move(x=at[0].x, y=at[0].y, model_x=at[1].x, model_y=at[1].y, raw=raw)
                )
        else:
            towards: Any = (
                ("right" if clicks > 0 else "left")
                if horizontal
                else ("up" if clicks > 0 else "down")
            )
            position: dict[str, Any] = {}
            if at is not None:
                position = {"x": at[0].x, "y": at[0].y, "model_x": at[1].x, "model_y": at[1].y}
            self.add(
                events.Scroll(direction=towards, amount=abs(clicks), raw=raw, **position),
                max(1, math.ceil(abs(clicks))),
            )
        if at is not None:
            self.pointer = at[0]

    def _scroll(self, args: dict[str, Any], raw: str) -> None:
        self._wheel(args, raw, "scroll", False)

    def _hscroll(self, args: dict[str, Any], raw: str) -> None:
        self._wheel(args, raw, "hscroll", True)

    def _write(self, args: dict[str, Any], raw: str) -> None:
        message = args.get("message")
        if isinstance(message, list):  # typewrite(['a', 'enter']): each is a key press
            for key in message:
                self.add(events.Hotkey(keys=(read_key(key),), raw=raw))
            return
        if not isinstance(message, str):
            raise Refused("write() needs message='text'")
        if message:
            self.add(events.TypeText(text=message, raw=raw))

    _typewrite = _write

    def _press(self, args: dict[str, Any], raw: str) -> None:
        keys = args.get("keys")
        names = keys if isinstance(keys, list) else [keys]
        if keys is None or not names:
            raise Refused("press() needs a key")
        presses = read_count(args.get("presses", 1), "presses", self.limits.amount)
        for _ in range(presses):
            for name in names:
                self.add(events.Hotkey(keys=(read_key(name),), raw=raw))

    def _hotkey(self, args: dict[str, Any], raw: str) -> None:
        keys = tuple(read_key(name) for name in args["keys"])
        if not keys:
            raise Refused("hotkey() needs keys")
        self.add(events.Hotkey(keys=keys, raw=raw))

    def _keyDown(self, args: dict[str, Any], raw: str) -> None:  # noqa: N802
        self.add(events.KeyDown(key=read_key(args.get("key")), raw=raw))

    def _keyUp(self, args: dict[str, Any], raw: str) -> None:  # noqa: N802
        self.add(events.KeyUp(key=read_key(args.get("key")), raw=raw))

    def _sleep(self, args: dict[str, Any], raw: str) -> None:
        seconds = read_number(args.get("seconds"), "seconds")
        if seconds < 0:
            raise Refused("sleep() needs seconds >= 0")
        self.slept += seconds
        if self.slept > self.limits.sleep_s:
            raise Refused(f"over {self.limits.sleep_s:g} s of sleep in one block")
        self.add(events.Wait(seconds=seconds, raw=raw))

    _time_sleep = _sleep
