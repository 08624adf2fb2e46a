"""Recorded messages in the OpenAI chat-completions format: what the model client sends, and
what an SFT export writes (there with images as file paths). No network, no ``openai`` import."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ownloop.store.events import ImagePart, Message, TextPart

__all__ = ["wire_messages"]


def wire_messages(
    messages: Sequence[Message], data_url: Callable[[ImagePart], str]
) -> list[dict[str, Any]]:
    """Messages in the OpenAI chat format; a message of one text part becomes a plain string."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        if len(message.parts) == 1 and isinstance(message.parts[0], TextPart):
            wire.append({"role": message.role, "content": message.parts[0].text})
            continue
        content: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            else:
                content.append({"type": "image_url", "image_url": {"url": data_url(part)}})
        wire.append({"role": message.role, "content": content})
    return wire
