"""Recorded text as a terminal shows it: literal, with every control character made visible.

A model answer, a page title or an imported field is data. In a terminal it must never restyle,
link, move the cursor, overwrite a line or reorder text, so before any recorded value reaches
Rich or ``click.echo`` it goes through :func:`visible`: C0 and C1 controls, DEL, the Unicode
bidirectional controls, line/paragraph separators and lone surrogates are written as escapes
(``\\x1b``, ``\\u202e``). Rich markup is never read from it either: :func:`cell` wraps it in a
``rich.text.Text``, which Rich does not parse (``[/x]`` stays ``[/x]``).
"""

from __future__ import annotations

import re

from rich.text import Text

__all__ = ["cell", "visible"]

# C0 controls but newline and tab, DEL, C1 controls, the bidirectional controls (marks, embeddings,
# overrides, isolates), line and paragraph separators, and lone surrogates (unprintable as UTF-8).
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff]"
)
_UNSAFE_ONE_LINE = re.compile(_UNSAFE.pattern[:1] + "\t\n" + _UNSAFE.pattern[1:])


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(value: object, limit: int | None = None, *, one_line: bool = False) -> str:
    """``value`` as text with every control character shown as an escape.

    Args:
        value: anything; None becomes ``NULL``, other values their ``str``.
        limit: shorten to this many characters (ending ``...``) before escaping.
        one_line: escape newlines and tabs too (for a line of output that must stay one line).
    """
    text = "NULL" if value is None else str(value)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 3, 0)] + "..."
    return (_UNSAFE_ONE_LINE if one_line else _UNSAFE).sub(_escape, text)


def cell(value: object, limit: int | None = None, *, style: str = "") -> Text:
    """``visible(value)`` as a Rich ``Text``: shown literally, never read as markup."""
    return Text(visible(value, limit), style=style)
