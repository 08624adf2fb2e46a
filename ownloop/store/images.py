"""The pixel budget: an image is measured from its header before anything decodes it.

A PNG of 12000x12000 pixels compresses to 420 kB and decodes to 432 MB of RGB (more while a
resize or a re-encode holds two copies): a thumbnail of one took a dashboard to 5.4 GB. Every
path that decodes an image from outside or from the store (import, the viewer's thumbnails and
crops, zoom, ``compact``, ``report --gif``, the SFT export) asks ``over_budget`` first and
refuses or skips the image with one line. The budget, ``PIXEL_BUDGET`` = 50 M pixels, is 24
screens of 1920x1080 and 6 of 4K; no screenshot a browser or desktop takes comes near it.

``image_size`` reads the header only (PIL's ``Image.open`` parses it and decodes nothing), so an
image over the budget costs a few hundred bytes read.
"""

from __future__ import annotations

import io
import warnings
from typing import NamedTuple

from ownloop.errors import OwnloopError

__all__ = ["PIXEL_BUDGET", "ImageTooLarge", "Size", "check_pixels", "image_size", "over_budget"]

PIXEL_BUDGET = 50_000_000


class ImageTooLarge(OwnloopError):
    """An image over the pixel budget: not decoded."""


class Size(NamedTuple):
    width: int
    height: int


def image_size(data: bytes) -> Size | None:
    """The image's width and height from its header, or None when it is not an image PIL reads
    (or one so large that PIL itself refuses to open it: ``over_budget`` says so)."""
    from PIL import Image

    try:
        return _header_size(data)
    except Image.DecompressionBombError:
        return None


_PNG = b"\x89PNG\r\n\x1a\n"


def _header_size(data: bytes) -> Size | None:
    # A PNG's size is in its first chunk (IHDR): read it directly, so a file that is only a
    # header declaring billions of pixels is measured too, though PIL would not open it.
    if data[:8] == _PNG and data[12:16] == b"IHDR" and len(data) >= 24:
        return Size(int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big"))
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():  # PIL's own bomb warning: the budget decides here
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                return Size(int(image.width), int(image.height))
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None


def over_budget(data: bytes) -> str | None:
    """Why the image may not be decoded ("12000x12000 pixels, over the 50 M pixel budget"), or
    None (within the budget, or not an image)."""
    from PIL import Image

    budget = f"over the {PIXEL_BUDGET // 1_000_000} M pixel budget"
    try:
        size = _header_size(data)
    except Image.DecompressionBombError:  # past twice PIL's own limit: it will not open it
        return f"more pixels than PIL opens, {budget}"
    if size is None or size.width * size.height <= PIXEL_BUDGET:
        return None
    return f"{size.width}x{size.height} pixels, {budget}"


def check_pixels(data: bytes, what: str) -> None:
    """Raise ``ImageTooLarge`` naming ``what`` when the image is over the budget."""
    reason = over_budget(data)
    if reason is not None:
        raise ImageTooLarge(f"{what}: {reason}: not decoded")
