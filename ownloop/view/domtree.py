"""A DOM snapshot (recorded HTML) as a tree the session page folds open element by element.

The HTML is parsed with the standard library's tolerant parser into plain values: tag names,
attributes and text stay ``str`` and the template escapes them, so a ``<script>`` in the snapshot
is shown as a node, never run. Big snapshots are cut at ``MAX_NODES`` nodes (the page says so);
whitespace-only text is left out.
"""

from __future__ import annotations

import functools
from html.parser import HTMLParser
from typing import NamedTuple

__all__ = ["MAX_NODES", "DomNode", "DomTree", "parse_dom"]

MAX_NODES = 4000
_VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}
_TEXT_LIMIT = 300


class DomNode(NamedTuple):
    """An element (``tag`` set) or a text node (``tag`` empty, ``text`` set)."""

    tag: str
    attributes: str  # as written: id="a" class="b"
    text: str
    children: list[DomNode]


class DomTree(NamedTuple):
    roots: list[DomNode]
    nodes: int
    cut: bool  # more than MAX_NODES nodes: the rest is left out


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.roots: list[DomNode] = []
        self.stack: list[DomNode] = []
        self.nodes = 0
        self.cut = False

    def _add(self, node: DomNode) -> bool:
        if self.nodes >= MAX_NODES:
            self.cut = True
            return False
        self.nodes += 1
        (self.stack[-1].children if self.stack else self.roots).append(node)
        return True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        text = " ".join(name if value is None else f'{name}="{value}"' for name, value in attrs)
        node = DomNode(tag, text, "", [])
        if self._add(node) and tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        text = " ".join(name if value is None else f'{name}="{value}"' for name, value in attrs)
        self._add(DomNode(tag, text, "", []))

    def handle_endtag(self, tag: str) -> None:
        # close up to the matching element; a stray end tag closes nothing
        for depth in range(len(self.stack) - 1, -1, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        text = " ".join(data.split())
        if text:
            if len(text) > _TEXT_LIMIT:
                text = text[: _TEXT_LIMIT - 1] + "…"
            self._add(DomNode("", "", text, []))


@functools.lru_cache(maxsize=32)
def parse_dom(html: str) -> DomTree:
    """The tree of ``html`` (cached: a session page parses its snapshot once)."""
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return DomTree(builder.roots, builder.nodes, builder.cut)
