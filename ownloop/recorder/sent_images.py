"""The images a request carries, at the size the agent's released client sends them.

Fara-7B's client resizes each screenshot to the model's size before sending it (1428x896 for a
1440x900 page). The recorder keeps the page's screenshot as the step's screenshot and stores the
resized image as a blob of its own; the request refers to that blob. Agents say the size through
``sent_image_size(image_size)``; one without it sends screenshots as they are.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from PIL import Image

from ownloop.store.events import ImagePart, Message

__all__ = ["SentImages", "resize_png"]


def resize_png(data: bytes, size: tuple[int, int]) -> bytes:
    """``data`` (an image) resized to ``size`` and written as PNG, as the released client does
    (Pillow's ``Image.resize`` with its default filter, then ``save(format="PNG")``)."""
    with Image.open(io.BytesIO(data)) as image:
        resized = image.resize(size)
    out = io.BytesIO()
    resized.save(out, format="PNG")
    return out.getvalue()


class SentImages:
    """Rewrites a request's images to their sent size; each image is resized once per episode.

    Args:
        sent_size: the agent's ``sent_image_size`` (None: images are sent as they are).
        get_blob: the bytes of a stored blob.
        put_blob: stores bytes and returns their sha256.
    """

    def __init__(
        self,
        sent_size: Callable[[tuple[int, int]], tuple[int, int]] | None,
        get_blob: Callable[[str], bytes],
        put_blob: Callable[[bytes], str],
    ) -> None:
        self._sent_size, self._get, self._put = sent_size, get_blob, put_blob
        self._done: dict[str, ImagePart] = {}

    def __call__(self, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        """``messages`` with every image replaced by its sent-size blob (the same tuple when
        nothing changes)."""
        if self._sent_size is None:
            return messages
        out: list[Message] = []
        changed = False
        for message in messages:
            parts = tuple(
                self._part(part) if isinstance(part, ImagePart) else part for part in message.parts
            )
            changed = changed or parts != message.parts
            out.append(Message(role=message.role, parts=parts))
        return tuple(out) if changed else messages

    def _part(self, part: ImagePart) -> ImagePart:
        assert self._sent_size is not None
        size = self._sent_size((part.width, part.height))
        if size == (part.width, part.height) or part.width <= 0 or part.height <= 0:
            return part
        done = self._done.get(part.sha256)
        if done is None:
            data = resize_png(self._get(part.sha256), size)
            done = ImagePart(
                sha256=self._put(data), media_type="image/png", width=size[0], height=size[1]
            )
            self._done[part.sha256] = done
        return done
