"""``ownloop report``: one session as a self-contained HTML file, and as an animated GIF.

The HTML file needs nothing but itself: screenshots are data URLs, the stylesheet is inline and
allowed by its hash, and there is no script at all. Its Content-Security-Policy (``default-src
'none'; img-src data:``) means that even opened from a mail attachment it requests nothing.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import NamedTuple

from ownloop.errors import OwnloopError
from ownloop.replay.fold import NoSessionEvents, Session, fold
from ownloop.replay.progress import StepProgress
from ownloop.replay.target import load_session
from ownloop.store import MissingBlob, Store
from ownloop.view.animation import write_gif
from ownloop.view.page import build_page
from ownloop.view.rendering import environment, static_text, style_hash

__all__ = ["ReportWritten", "render_report", "write_report", "write_reports"]

_TEXT_LIMIT = 2_000_000  # characters of a DOM snapshot embedded; the rest is cut, and said so


class ReportWritten(NamedTuple):
    """What ``write_reports`` wrote."""

    session: Session
    paths: list[Path]

    def lines(self) -> list[str]:
        """One line per file written."""
        return [
            f"wrote {path} ({path.stat().st_size:,} bytes) for session "
            f"{self.session.session_id} ({self.session.task_id or '?'}, "
            f"{len(self.session.steps)} steps)"
            for path in self.paths
        ]


def _data_url(store: Store, sha256: str, media_type: str) -> str:
    try:
        data = store.get_blob(sha256)
    except (MissingBlob, ValueError):
        return ""  # the page says the screenshot is missing
    return f"data:{media_type or 'image/png'};base64," + base64.b64encode(data).decode("ascii")


def _blob_text(store: Store, sha256: str) -> str | None:
    try:
        text = store.get_blob(sha256).decode("utf-8", errors="replace")
    except (MissingBlob, ValueError):
        return None
    if len(text) > _TEXT_LIMIT:
        text = text[:_TEXT_LIMIT] + f"\n[... cut: {len(text) - _TEXT_LIMIT:,} more characters]"
    return text


def _parent(store: Store, session: Session) -> Session | None:
    if not session.parent_session_id:
        return None
    try:
        return fold(store.session_events(session.parent_session_id), session.parent_session_id)
    except NoSessionEvents:
        return None


def render_report(store: Store, session: Session) -> str:
    """The report of ``session`` as one HTML document (a replay shows its parent beside it)."""
    images: dict[str, str] = {}

    def image_url(sha256: str, media_type: str) -> str:
        if sha256 not in images:  # a screenshot seen twice is read once
            images[sha256] = _data_url(store, sha256, media_type)
        return images[sha256]

    page = build_page(
        session,
        image_url,
        parent=_parent(store, session),
        blob_text=lambda sha: _blob_text(store, sha),
    )
    css = static_text("view.css")
    return (
        environment()
        .get_template("session.html")
        .render(page=page, report=True, css=css, style_source=style_hash(css))
    )


def write_report(store: Store, session: Session, out: Path) -> Path:
    """Write the HTML report of ``session`` to ``out``; returns ``out``.

    Raises:
        OwnloopError: ``out`` cannot be written.
    """
    html = render_report(store, session)
    try:
        out.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise OwnloopError(f"cannot write {out}: {exc.strerror or exc}") from None
    return out


def write_reports(
    store: Store, target: str, run_id: str | None, out: str | Path | None, gif: str | Path | None
) -> ReportWritten:
    """The ``report`` command: the session ``target`` names, as HTML (``out``) and/or a GIF.

    Raises:
        OwnloopError: neither output was asked for, nothing matches ``target``, or a file cannot
            be written.
    """
    if out is None and gif is None:
        raise OwnloopError("say where to write: --out FILE.html and/or --gif FILE.gif")
    session = load_session(store, target, run_id)
    paths = []
    if out is not None:
        paths.append(write_report(store, session, Path(out)))
    if gif is not None:
        with StepProgress(f"gif {Path(gif).name}", "frame", len(session.steps)) as progress:
            paths.append(write_gif(store, session, Path(gif), on_frame=progress.advance))
    return ReportWritten(session, paths)
