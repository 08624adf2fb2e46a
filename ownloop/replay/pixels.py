"""Screenshots decoded once for all the comparisons of a step.

A re-executed step whose screenshot is not byte-identical to the recording's is compared twice:
by the guard (does the page still look the same around the target?) and by the fidelity
measure (what fraction of pixels changed?), on two threads. Decoding a 1280x800 PNG costs about
10 ms of CPU, and a batch of replays is bound by CPU, so the last few decoded pictures are kept,
keyed by their bytes: the second comparison of a pair decodes nothing.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["decoded"]

# Two workers, each with a step's pair and the next step's, with room to spare: at most about
# 32 MB of 1280x800 pictures stay in memory.
_KEEP = 8
_lock = threading.Lock()
_kept: OrderedDict[bytes, Image.Image] = OrderedDict()


def decoded(data: bytes) -> Image.Image:
    """The picture in ``data`` (a PNG, or any image Pillow reads), decoded. Callers only read
    it (``convert``, ``crop`` and the like make new pictures): it may be shared."""
    with _lock:
        image = _kept.get(data)
        if image is not None:
            _kept.move_to_end(data)
            return image
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    image.load()
    with _lock:
        _kept[data] = image
        while len(_kept) > _KEEP:
            _kept.popitem(last=False)
    return image
