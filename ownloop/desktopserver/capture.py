"""What the test desktop shows: a screenshot with the pointer drawn in, and a tree of its windows.

The screenshot is the X display grabbed through XCB (Pillow's ``ImageGrab``) with an arrow drawn
at the pointer, as OSWorld's server draws one (X screenshots do not hold the cursor).

The accessibility tree (``accessibility_tree``) is AT-SPI's when the desktop has a session bus
and Debian's pyatspi (``atspi_tree.py``): the apps' own trees, with the editor's buffer and a
page's fields as ``text``. A window with no AT-SPI tree of its own (xterm is no AT-SPI app) is
added as the window manager sees it. Without AT-SPI the whole tree is the window manager's view
(``window_tree``): one ``<application>`` per window with its title, class, process id, geometry
and whether it has the focus, read from ``wmctrl`` and ``xdotool``.
"""

from __future__ import annotations

import io
import re
import subprocess
from collections.abc import Mapping
from typing import NamedTuple
from xml.sax.saxutils import quoteattr

from PIL import ImageDraw, ImageGrab

__all__ = [
    "Window",
    "accessibility_tree",
    "active_window",
    "mouse_location",
    "pointer",
    "screenshot_png",
    "window_tree",
    "windows",
]

# An arrow pointer, 12 x 19 px, tip at (0, 0).
_ARROW = ((0, 0), (0, 16), (4, 12), (7, 19), (9, 18), (6, 11), (12, 11))


class Window(NamedTuple):
    id: str  # 0x... as wmctrl prints it
    pid: int
    x: int
    y: int
    width: int
    height: int
    wm_class: str  # instance.Class, e.g. "xterm.XTerm"
    title: str


def mouse_location(env: Mapping[str, str], timeout_s: float) -> dict[str, str]:
    """What ``xdotool getmouselocation --shell`` says (``X``, ``Y``, ``SCREEN``, ``WINDOW``);
    empty when it says nothing.

    Raises:
        subprocess.TimeoutExpired: xdotool did not answer within ``timeout_s``.
    """
    result = subprocess.run(
        ["xdotool", "getmouselocation", "--shell"],
        env=dict(env),
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    return dict(line.split("=", 1) for line in result.stdout.decode().splitlines() if "=" in line)


def pointer(env: Mapping[str, str]) -> tuple[int, int]:
    """The pointer's (x, y) on the display; (0, 0) when xdotool cannot tell."""
    values = mouse_location(env, 10)
    try:
        return int(values["X"]), int(values["Y"])
    except (KeyError, ValueError):
        return 0, 0


def screenshot_png(env: Mapping[str, str]) -> bytes:
    """The display as PNG bytes, the pointer drawn in."""
    image = ImageGrab.grab(xdisplay=env["DISPLAY"]).convert("RGB")
    x, y = pointer(env)
    draw = ImageDraw.Draw(image)
    draw.polygon([(x + dx, y + dy) for dx, dy in _ARROW], fill="white", outline="black")
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=1)  # speed over size: screenshots are taken each step
    return out.getvalue()


def windows(env: Mapping[str, str]) -> list[Window]:
    """The managed windows, bottom to top (``wmctrl -lpGx``)."""
    result = subprocess.run(
        ["wmctrl", "-lpGx"], env=dict(env), capture_output=True, timeout=10, check=False
    )
    found = []
    for line in result.stdout.decode(errors="replace").splitlines():
        parts = line.split(None, 9)
        if len(parts) < 9:
            continue
        wid, _desk, pid, x, y, w, h, wm_class = parts[:8]
        title = parts[9] if len(parts) > 9 else ""
        try:
            found.append(Window(wid, int(pid), int(x), int(y), int(w), int(h), wm_class, title))
        except ValueError:
            continue
    return found


def active_window(env: Mapping[str, str]) -> int | None:
    """The focused window's id as a number, None when none has the focus."""
    result = subprocess.run(
        ["xdotool", "getactivewindow"], env=dict(env), capture_output=True, timeout=10, check=False
    )
    text = result.stdout.decode().strip()
    return int(text) if text.isdigit() else None


_PID = re.compile(r'<application [^>]*pid="(\d+)"')


def accessibility_tree(env: Mapping[str, str], size: tuple[int, int], atspi: str | None) -> str:
    """The desktop's accessibility tree as XML: the AT-SPI tree ``atspi`` (None: there is none)
    with the windows it lacks added, else the windows alone."""
    tree = (atspi or "").rstrip()
    if not tree.endswith("</desktop-frame>"):
        return window_tree(env, size)
    covered = {int(pid) for pid in _PID.findall(tree)}
    focused = active_window(env)
    missing = [
        line
        for window in windows(env)
        if window.pid not in covered
        for line in _window_lines(window, focused)
    ]
    head, _, _ = tree.rpartition("</desktop-frame>")
    return "\n".join([head.rstrip("\n"), *missing, "</desktop-frame>"])


def _window_lines(window: Window, focused: int | None) -> list[str]:
    is_focused = focused is not None and int(window.id, 16) == focused
    return [
        f"  <application name={quoteattr(window.title)} class={quoteattr(window.wm_class)} "
        f'pid="{window.pid}">',
        f"    <frame name={quoteattr(window.title)} id={quoteattr(window.id)} "
        f'x="{window.x}" y="{window.y}" width="{window.width}" height="{window.height}"'
        f' focused="{"true" if is_focused else "false"}"/>',
        "  </application>",
    ]


def window_tree(env: Mapping[str, str], size: tuple[int, int]) -> str:
    """The desktop as XML: ``<desktop-frame>`` holding one ``<application>`` per window.

    Each application has ``name`` (the window title), ``class`` (WM_CLASS), ``pid``, and one
    ``<frame>`` child with the title again, ``x``/``y``/``width``/``height`` in screen pixels
    and ``focused="true"`` on the window with the keyboard focus. What is inside a window (its
    widgets, the terminal's text, the editor's buffer) is not in it.
    """
    focused = active_window(env)
    width, height = size
    px, py = pointer(env)
    lines = [
        f'<desktop-frame name="ownloop test desktop" width="{width}" height="{height}" '
        f'pointer-x="{px}" pointer-y="{py}">'
    ]
    for window in windows(env):
        lines.extend(_window_lines(window, focused))
    lines.append("</desktop-frame>")
    return "\n".join(lines)
