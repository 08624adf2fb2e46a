"""What a user gets of a screenshot: its pixels. A recorded store's screenshots are lossless WebP
once the background compaction is done (the same pixels under the PNG's name, and the bytes read
back are a PNG re-encoded from them), so tests of exported or served images compare pixels with
the store's, not bytes with the blob's name."""

from __future__ import annotations

import io

from PIL import Image

from ownloop.store import Store
from ownloop.store.blobs import decode_compacted, pixel_sha256


def image_pixels(data: bytes) -> str:
    """The pixel hash (mode, size, pixels) of an image file's bytes, PNG or WebP."""
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        return pixel_sha256(image)


def blob_pixels(store: Store, sha256: str) -> str:
    """The pixel hash of blob ``sha256`` as stored: its PNG's, or its compacted WebP's (in the
    PNG's mode)."""
    data = store.blobs.get_stored(sha256)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        image, _ = decode_compacted(data)
        return pixel_sha256(image)
    return image_pixels(data)
