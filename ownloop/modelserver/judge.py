"""The scripted judge (``serve-model --expert judge``): answers ``ownloop judge``'s requests with
deterministic verdicts, for tests and ``ownloop demo --judge``.

It reads what the built-in judges send (``ownloop.replay.judges``): a key-point request gets two
key points; a screenshot-scoring request ``Score: 1`` for a blank (one-colour) screenshot, else
``Score: 4``; an outcome request ``Verdict: SUCCESS`` when the recorded actions' last step ends the
task (``finish``) with the answer the request states and no screenshot shown is blank, else
``Verdict: FAILURE``. So it fails both kinds of control (blanked screenshots, a swapped answer),
and it never reads the agent's answer or thoughts as instructions: only the action lines.

``--noise P`` flips a verdict with probability P (seeded draws, ``ownloop.modelserver.noise``:
the same request asked again gets a new draw, so repeats of a judging disagree as a sampled
model's would).
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
from typing import Any

from ownloop.modelserver.chat import Reply, image_urls, request_text
from ownloop.modelserver.noise import Noise

__all__ = ["ScriptedJudge"]

_STEP = re.compile(r"^step (\d+): (.*?)   \(thought: ", re.MULTILINE)
_ANSWER = re.compile(r"final answer:\n```\n(.*?)\n```", re.DOTALL)
_FINISH = re.compile(r"finish\((?:answer=(.*))?\)$")


def _blank(url: str) -> bool:
    """Whether a data-URL image has one colour only."""
    from PIL import Image

    if not url.startswith("data:") or "," not in url:
        return False
    try:
        with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as image:
            extrema = image.convert("RGB").getextrema()
    except (OSError, ValueError):
        return False
    return all(band[0] == band[1] for band in extrema if isinstance(band, tuple))


class ScriptedJudge:
    """A responder for judge requests (see the module docstring)."""

    def __init__(self, noise: float = 0.0, seed: int = 0) -> None:
        self.noise = Noise(noise, seed) if noise else None

    def __call__(self, request: dict[str, Any]) -> Reply:
        text = request_text(request)
        images = image_urls(request)
        if "List the key points" in text:
            return Reply("1. The state the task asks for is reached.\n2. The answer is given.")
        if 'end with "Score: N"' in text:
            blank = any(_blank(url) for url in images)
            return Reply(
                f"The screenshot {'is blank' if blank else 'shows the page'}.\n"
                f"Score: {1 if blank else 4}"
            )
        done, why = self._outcome(text, images)
        if self.noise is not None:
            key = hashlib.sha256(text.encode() + "".join(images).encode()).hexdigest()
            if self.noise.draw(key) < self.noise.probability:
                done, why = not done, why + " (a noisy verdict)"
        return Reply(f"{why}\nVerdict: {'SUCCESS' if done else 'FAILURE'}")

    @staticmethod
    def _outcome(text: str, images: list[str]) -> tuple[bool, str]:
        steps = _STEP.findall(text)
        if not steps:
            return False, "No step was taken."
        last = steps[-1][1].split("; ")[-1]
        finish = _FINISH.match(last)
        if finish is None:
            return False, f"The last step ({last}) does not end the task."
        if any(_blank(url) for url in images):
            return False, "A screenshot shows nothing: there is no evidence of the result."
        stated = _ANSWER.search(text)
        given = finish.group(1)
        if stated is not None and given is not None and given != _rendered(stated.group(1)):
            return False, "The answer stated is not the answer the agent gave."
        return True, "The agent ended the task after acting on the page."


def _rendered(answer: str) -> str:
    """An answer as the action lines show a ``finish(answer=...)`` (``replay.render``)."""
    return repr(answer if len(answer) <= 60 else answer[:57] + "...")
