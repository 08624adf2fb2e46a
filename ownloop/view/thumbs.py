"""Screenshot thumbnails and content boxes, made on demand from the blobs and kept in memory.

A thumbnail is a small WebP (about 5-15 kB for a 1280x800 page at 240 px wide) made the first
time a page asks for it and kept in a bounded cache; the browser then keeps it too (a blob never
changes, so its thumbnail never does). The content box is the part of a screenshot that is not
page background: the colour most corners share is the background, and the box bounds every pixel
that differs from it by more than a little (anti-aliasing and JPEG noise stay out).
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

from PIL import Image, ImageChops

from ownloop.store.images import check_pixels

__all__ = ["Box", "ImageCache", "content_box", "thumbnail"]

THUMB_WIDTHS = (120, 160, 240, 320)
_NOISE = 16  # per-channel difference below which a pixel counts as background


class Box(NamedTuple):
    """A rectangle of a screenshot in its own pixels, and the screenshot's size."""

    x: int
    y: int
    width: int
    height: int
    image_width: int
    image_height: int


def thumbnail(data: bytes, width: int, *, crop: bool = False) -> bytes:
    """``data`` (an image) scaled to ``width`` pixels wide (never up), as WebP; ``crop``: only
    its content box (a small page in a big grey viewport stays readable).

    Raises:
        ImageTooLarge: the image is over the pixel budget (it is not decoded).
    """
    check_pixels(data, "the screenshot")
    with Image.open(io.BytesIO(data)) as image:
        if not crop:
            image.draft("RGB", (width, width * 4))  # JPEG decodes at a smaller size directly
        picture = image.convert("RGB")
    if crop:
        box = content_box(data)
        picture = picture.crop((box.x, box.y, box.x + box.width, box.y + box.height))
    if picture.width > width:
        picture = picture.resize(
            (width, max(1, round(picture.height * width / picture.width))), Image.Resampling.LANCZOS
        )
    out = io.BytesIO()
    picture.save(out, format="WEBP", quality=70, method=4)
    return out.getvalue()


def content_box(data: bytes) -> Box:
    """The box around everything in the screenshot that is not its background colour.

    Raises:
        ImageTooLarge: the image is over the pixel budget (it is not decoded).
    """
    check_pixels(data, "the screenshot")
    with Image.open(io.BytesIO(data)) as image:
        picture = image.convert("RGB")
    w, h = picture.size
    corners = [picture.getpixel(p) for p in ((0, 0), (w - 1, 0), (0, h - 1), (w - 1, h - 1))]
    background = max(corners, key=corners.count)
    diff = ImageChops.difference(picture, Image.new("RGB", picture.size, background))
    mask = diff.convert("L").point(lambda v: 255 if v > _NOISE else 0)
    bbox = mask.getbbox()
    if bbox is None:
        return Box(0, 0, w, h, w, h)
    left, top, right, bottom = bbox
    pad = 8  # a margin, so a border on the edge stays visible
    left, top = max(0, left - pad), max(0, top - pad)
    right, bottom = min(w, right + pad), min(h, bottom + pad)
    return Box(left, top, right - left, bottom - top, w, h)


class ImageCache:
    """At most ``size`` computed values by key, least recently used dropped first."""

    def __init__(self, size: int = 2048) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, int], object] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int], make: Callable[[], object]) -> object:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = make()  # outside the lock: two threads may both make it, which is harmless
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return value
