"""Screenshots are decoded once for the guard's and the fidelity's comparisons, and the
comparisons give what they gave when each decoded its own copy."""

from __future__ import annotations

import io
import random

from PIL import Image, ImageChops, ImageDraw, ImageStat

from ownloop.replay import pixels
from ownloop.replay.fidelity import pixel_diff
from ownloop.replay.guard import perceptual_distance


def _png(seed: int, mode: str = "RGB", size: tuple[int, int] = (320, 200)) -> bytes:
    rng = random.Random(seed)
    image = Image.new(mode, size, (250, 250, 250, 255)[: len(mode)])
    draw = ImageDraw.Draw(image)
    for _ in range(6):
        x, y = rng.randrange(size[0] - 40), rng.randrange(size[1] - 20)
        color = tuple(rng.randrange(256) for _ in mode)
        draw.rectangle((x, y, x + rng.randrange(5, 40), y + rng.randrange(5, 20)), fill=color)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def test_equal_bytes_are_decoded_once_and_only_the_last_few_are_kept() -> None:
    data = _png(1)
    first = pixels.decoded(data)
    assert pixels.decoded(bytes(bytearray(data))) is first  # another object, the same bytes
    for seed in range(2, 2 + pixels._KEEP):
        pixels.decoded(_png(seed))
    assert pixels.decoded(data) is not first  # pushed out by newer pictures, decoded again
    assert pixels.decoded(data).tobytes() == first.tobytes()


def _old_distance(first: bytes, second: bytes, box: tuple[int, int, int, int]) -> float:
    """The guard's distance as it was computed before pictures were shared: each picture made
    grey whole, then cropped."""
    grey = [
        Image.open(io.BytesIO(data)).convert("L").crop(box).resize((16, 16), Image.Resampling.BOX)
        for data in (first, second)
    ]
    difference = ImageChops.difference(grey[0], grey[1])
    return round(float(ImageStat.Stat(difference).mean[0]) / 255.0, 6)


def test_the_comparisons_give_what_they_gave_before() -> None:
    for seed in range(6):
        one, two = _png(100 + seed), _png(200 + seed)
        assert perceptual_distance(one, two) == _old_distance(one, two, (0, 0, 320, 200))
        # ``point`` (100, 80) with the guard's region of 48 pixels each way
        assert perceptual_distance(one, two, (100, 80)) == _old_distance(
            one, two, (52, 32, 148, 128)
        )


def test_pixel_diff_counts_the_same_pixels_whatever_the_modes() -> None:
    base = Image.new("RGB", (40, 20), (10, 20, 30))
    changed = base.copy()
    changed.putpixel((3, 4), (10, 20, 31))  # one channel of one pixel
    changed.putpixel((30, 10), (0, 0, 0))

    def png(image: Image.Image) -> bytes:
        out = io.BytesIO()
        image.save(out, format="PNG")
        return out.getvalue()

    expected = 2 / (40 * 20)
    assert pixel_diff(png(base), png(changed)) == expected
    assert pixel_diff(png(base.convert("RGBA")), png(changed)) == expected
    assert pixel_diff(png(base.convert("RGBA")), png(changed.convert("RGBA"))) == expected
    assert pixel_diff(png(base), png(base)) == 0.0
    assert pixel_diff(png(base), png(base.resize((20, 20)))) is None
