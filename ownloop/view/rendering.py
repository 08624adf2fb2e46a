"""The template engine the viewer and the report share: Jinja2 with autoescape on everything.

Recorded text reaches a template as plain ``str``; autoescape turns it into text, never markup.
Before escaping, every value printed goes through ``plain`` (``finalize``), which writes control
characters and bidirectional overrides as visible escapes, so a page title cannot reorder what is
around it either. Our own files (the stylesheet) are the only thing ever marked safe.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import shlex
from datetime import datetime
from importlib import resources
from typing import Any

import jinja2
import markupsafe

from ownloop.replay.render import plain

__all__ = ["environment", "static_text", "style_hash"]


def _finalize(value: Any) -> Any:
    if isinstance(value, markupsafe.Markup):  # our own file, marked safe on purpose
        return value
    return plain(value) if isinstance(value, str) else ("" if value is None else value)


def _number(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return ""
    return f"{value:,.{digits}f}"


def _short(text: str | None, limit: int = 80) -> str:
    if not text:
        return ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


@functools.cache
def environment() -> jinja2.Environment:
    """The Jinja2 environment over ``ownloop/view/templates`` (autoescape on, strict undefined)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ownloop.view", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["number"] = _number
    env.filters["short"] = _short
    env.filters["when"] = _when
    env.filters["shquote"] = shlex.quote  # a command shown to paste: the shell's own quoting
    return env


@functools.cache
def static_text(name: str) -> str:
    """The text of one of our static files (``view.css``, ``view.js``)."""
    return resources.files("ownloop.view").joinpath("static", name).read_text(encoding="utf-8")


def style_hash(css: str) -> str:
    """The CSP source (``'sha256-...'``) that allows exactly this inline stylesheet."""
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    return f"'sha256-{digest}'"
