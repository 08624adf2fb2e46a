"""A session as an animated GIF (Pillow): one frame per step, its screenshot with the marks drawn
and a caption saying what the step did."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from ownloop.errors import OwnloopError
from ownloop.replay.fold import Session, Step
from ownloop.replay.render import action_text, plain
from ownloop.store import MissingBlob, Store
from ownloop.store.images import over_budget
from ownloop.view.marks import Mark, arrow_head, session_marks

__all__ = ["render_frames", "write_gif"]

MAX_WIDTH = 960  # frames wider than this are scaled down: a GIF for a bug report, not an archive
FRAME_MS = 1200
_CAPTION = 44  # pixels of caption band under the screenshot
_RED = (229, 72, 77)
_BLUE = (11, 114, 231)
_ORANGE = (245, 165, 36)
_PURPLE = (142, 78, 198)


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError):  # a Pillow without FreeType: the bitmap font
        return ImageFont.load_default()


def _screenshot(store: Store, step: Step, viewport: tuple[int, int]) -> Image.Image:
    shot = step.screenshot
    words = "screenshot missing" if shot is not None else "no screenshot"
    if shot is not None:
        try:
            data = store.blobs.get_stored(shot.sha256)  # (a compacted one: its WebP, same pixels)
            too_large = over_budget(data)  # measured from its header: never decoded
            if too_large:
                words = f"screenshot not drawn: {too_large}"
            else:
                with Image.open(io.BytesIO(data)) as image:
                    return image.convert("RGB")
        except (MissingBlob, ValueError, OSError):
            pass  # drawn as a grey frame that says so
    width, height = viewport if viewport[0] > 0 else (1280, 800)
    frame = Image.new("RGB", (width, height), (90, 90, 90))
    ImageDraw.Draw(frame).text((20, 20), words, fill=(255, 255, 255), font=_font(28))
    return frame


def _draw_mark(
    draw: ImageDraw.ImageDraw,
    mark: Mark,
    scale: float,
    r: float,
    font: ImageFont.ImageFont | ImageFont.FreeTypeFont,
) -> None:
    x, y = mark.x * scale, mark.y * scale
    if mark.kind in ("click", "double_click", "right_click"):
        colour = _PURPLE if mark.kind == "right_click" else _RED
        draw.ellipse((x - r, y - r, x + r, y + r), outline=colour, width=3)
        if mark.kind == "double_click":
            draw.ellipse(
                (x - r * 1.6, y - r * 1.6, x + r * 1.6, y + r * 1.6), outline=colour, width=2
            )
        draw.ellipse((x - r / 3, y - r / 3, x + r / 3, y + r / 3), fill=colour)
    elif mark.kind == "move":
        draw.ellipse((x - r / 2, y - r / 2, x + r / 2, y + r / 2), fill=_ORANGE)
    elif mark.x2 is not None and mark.y2 is not None:
        colour = _BLUE if mark.kind == "scroll" else _RED
        x2, y2 = mark.x2 * scale, mark.y2 * scale
        if mark.kind == "drag":
            draw.ellipse((x - r / 2, y - r / 2, x + r / 2, y + r / 2), fill=colour)
        draw.line((x, y, x2, y2), fill=colour, width=max(2, int(r / 3)))
        draw.polygon(arrow_head(x, y, x2, y2, r * 1.6), fill=colour)
    if mark.label:
        draw.text(
            (x + r * 1.4, y + r * 1.2),
            plain(mark.label, 60),
            fill=(17, 17, 17),
            font=font,
            stroke_width=3,
            stroke_fill=(255, 255, 255),
        )


def _caption(step: Step, count: int) -> str:
    did = "; ".join(action_text(a) for a in step.actions)
    if not did and step.parsed is not None and step.parsed.error:
        did = f"parse error: {step.parsed.error}"
    if any(not effect.ok for effect in step.effects):
        did += "  [operation failed]"
    return plain(f"step {step.step}/{count}  {did or 'no action'}", 140)


def render_frames(
    store: Store, session: Session, on_frame: Callable[[int], None] | None = None
) -> list[Image.Image]:
    """One RGB frame per step of ``session``: screenshot, marks, caption; ``on_frame(n)`` after
    the n-th."""
    marks = session_marks(session)
    frames = []
    count = len(session.steps)
    for step in session.steps:
        shot = _screenshot(store, step, session.viewport)
        scale = min(1.0, MAX_WIDTH / shot.width)
        if scale < 1.0:
            shot = shot.resize(
                (round(shot.width * scale), round(shot.height * scale)), Image.Resampling.LANCZOS
            )
        frame = Image.new("RGB", (shot.width, shot.height + _CAPTION), (29, 35, 48))
        frame.paste(shot, (0, 0))
        draw = ImageDraw.Draw(frame)
        r = max(8.0, shot.width / 90)
        label_font = _font(max(12, int(r * 1.6)))
        for mark in marks[step.step]:
            _draw_mark(draw, mark, scale, r, label_font)
        draw.text(
            (10, shot.height + 12), _caption(step, count), fill=(255, 255, 255), font=_font(18)
        )
        frames.append(frame)
        if on_frame is not None:
            on_frame(len(frames))
    return frames


def write_gif(
    store: Store,
    session: Session,
    out: Path,
    frame_ms: int = FRAME_MS,
    on_frame: Callable[[int], None] | None = None,
) -> Path:
    """Write ``session`` as an animated GIF (looping, ``frame_ms`` per step) to ``out``;
    ``on_frame(n)`` is called as each frame is drawn.

    Raises:
        OwnloopError: the session has no steps, or ``out`` cannot be written.
    """
    frames = render_frames(store, session, on_frame)
    if not frames:
        raise OwnloopError(f"session {session.session_id} has no steps to animate")
    try:
        frames[0].save(
            out, format="GIF", save_all=True, append_images=frames[1:], duration=frame_ms, loop=0
        )
    except OSError as exc:
        raise OwnloopError(f"cannot write {out}: {exc.strerror or exc}") from None
    return out
