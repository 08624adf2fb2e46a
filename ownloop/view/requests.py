"""What the model saw at each step: the request of the step's accepted call, message by message.

The session page shows it in a panel under each step (the system prompt, the history, every
image sent, in order). A long session repeats most of its request at every step (the system
prompt, the older turns), so a message is written out the first time the page shows it and
later named by where it first appeared ("as at step 1"); images are always shown, as thumbnails,
since which screenshots the model was sent is the point. Text is cut at ``TEXT_LIMIT`` characters
with the rest counted.
"""

from __future__ import annotations

from typing import NamedTuple

from ownloop.replay.fold import Session
from ownloop.store.events import ImagePart, Message, TextPart

__all__ = ["TEXT_LIMIT", "MessageView", "PartView", "RequestView", "request_views"]

TEXT_LIMIT = 4_000


class PartView(NamedTuple):
    kind: str  # "text" or "image"
    text: str = ""  # a text part (cut at TEXT_LIMIT)
    cut: int = 0  # characters left out
    sha256: str = ""  # an image part's blob
    width: int = 0
    height: int = 0


class MessageView(NamedTuple):
    place: int  # its place in the request, from 1
    role: str
    parts: list[PartView]  # empty when ``same_as`` says where it was shown
    same_as: int | None = None  # the step whose request showed this message first


class RequestView(NamedTuple):
    messages: list[MessageView]
    images: int  # how many images the request sent

    @property
    def summary(self) -> str:
        n, images = len(self.messages), self.images
        return f"{n} message{'s' * (n != 1)}, {images} image{'s' * (images != 1)}"


def _key(message: Message) -> tuple[str, tuple[tuple[str, str], ...]]:
    return message.role, tuple(
        ("text", part.text) if isinstance(part, TextPart) else ("image", part.sha256)
        for part in message.parts
    )


def _part(part: TextPart | ImagePart) -> PartView:
    if isinstance(part, ImagePart):
        return PartView("image", sha256=part.sha256, width=part.width, height=part.height)
    text = part.text
    return PartView("text", text=text[:TEXT_LIMIT], cut=max(0, len(text) - TEXT_LIMIT))


def request_views(session: Session) -> dict[int, RequestView]:
    """Each step's request (its last call's: the one the recorder acted on), by step number."""
    first_seen: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    views: dict[int, RequestView] = {}
    for step in session.steps:
        if not step.calls or not step.calls[-1].messages:
            continue
        shown = []
        images = 0
        for index, message in enumerate(step.calls[-1].messages, start=1):
            key = _key(message)
            images += sum(isinstance(part, ImagePart) for part in message.parts)
            earlier = first_seen.get(key)
            if earlier is not None and not any(isinstance(p, ImagePart) for p in message.parts):
                shown.append(MessageView(index, message.role, [], earlier))
                continue
            first_seen.setdefault(key, step.step)
            shown.append(MessageView(index, message.role, [_part(p) for p in message.parts]))
        views[step.step] = RequestView(shown, images)
    return views
