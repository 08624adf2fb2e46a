"""Print the desktop's AT-SPI accessibility tree as XML (run by Debian's ``/usr/bin/python3``).

The test desktop runs this file as a script, with the desktop's environment (its D-Bus session
bus, where the apps publish their trees), because ``pyatspi`` is a Debian package for the
system's Python, not a wheel for ownloop's. ownloop never imports it. With ``--serve`` it stays
up (importing pyatspi takes longer than reading a tree) and prints one tree, followed by the
line ``END``, for each line read on its standard input.

One element per accessible, named after its role (``push-button``, ``text``, ``frame``), with
``name``, the screen extents (``x``, ``y``, ``width``, ``height``), ``pid`` on applications, and
``text`` (its first 2,000 characters) where the accessible has text: the editor's buffer, a
page's fields. Accessibles that are not showing (closed menus) are left out with their subtrees,
and so is anything past depth 50, past 1,024 children of one node, or past 5,000 nodes in all
(OSWorld's server has the same limits).
"""

from __future__ import annotations

import sys
from typing import Any
from xml.sax.saxutils import quoteattr

MAX_DEPTH = 50
MAX_CHILDREN = 1024
MAX_NODES = 5000
MAX_TEXT = 2000


def _attributes(pyatspi: Any, node: Any, depth: int) -> str:
    parts = [f"name={quoteattr(node.name or '')}"]
    try:
        x, y, width, height = node.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
        parts.append(f'x="{x}" y="{y}" width="{width}" height="{height}"')
    except Exception:  # noqa: BLE001, S110 - an accessible without extents has none
        pass
    if depth == 1:
        try:
            parts.append(f'pid="{node.get_process_id()}"')
        except Exception:  # noqa: BLE001, S110 - an application that does not say
            pass
    try:
        text = node.queryText()
        content = text.getText(0, min(text.characterCount, MAX_TEXT))
        if content and content.strip("\ufffc"):
            parts.append(f"text={quoteattr(content)}")
    except Exception:  # noqa: BLE001, S110 - most accessibles have no text
        pass
    return " ".join(parts)


def _walk(pyatspi: Any, node: Any, depth: int, out: list[str], budget: list[int]) -> None:
    if depth > MAX_DEPTH or budget[0] <= 0:
        return
    budget[0] -= 1
    pad = "  " * depth
    try:
        if depth > 1 and not node.getState().contains(pyatspi.STATE_SHOWING):
            return
        role = (node.getRoleName() or "unknown").replace(" ", "-")
        out.append(f"{pad}<{role} {_attributes(pyatspi, node, depth)}>")
        for index in range(min(node.childCount, MAX_CHILDREN)):
            child = node.getChildAtIndex(index)
            if child is not None:
                _walk(pyatspi, child, depth + 1, out, budget)
        out.append(f"{pad}</{role}>")
    except Exception as error:  # noqa: BLE001 - an app that went away mid-walk
        out.append(f"{pad}<!-- {type(error).__name__} -->")


END = "END"


def _tree(pyatspi: Any) -> str:
    out: list[str] = []
    _walk(pyatspi, pyatspi.Registry.getDesktop(0), 0, out, [MAX_NODES])
    return "\n".join(out) + "\n"


def main() -> int:
    import pyatspi

    if sys.argv[1:] != ["--serve"]:
        sys.stdout.write(_tree(pyatspi))
        return 0
    for _ in sys.stdin:
        sys.stdout.write(_tree(pyatspi) + END + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
