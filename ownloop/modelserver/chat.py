"""A chat-completions request as a responder sees it, the reply it gives, and the faults it raises.

A responder is any callable ``(request) -> Reply``: ``request`` is the decoded JSON body of
``POST /v1/chat/completions``. Instead of replying it may raise one of the ``Fault`` exceptions
below; the server turns each into what a broken endpoint would do on the wire.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Callable
from typing import Any

import msgspec

__all__ = [
    "BadRequest",
    "DropConnection",
    "Fault",
    "Hang",
    "HttpFault",
    "RawBody",
    "Reply",
    "Responder",
    "StopListening",
    "TaskStatement",
    "assistant_turns",
    "find_task",
    "image_urls",
    "last_image_size",
    "request_text",
    "steps_taken",
    "template_switches",
    "thinking_requested",
]


class Reply(msgspec.Struct, frozen=True):
    """What the model says: its text and why it stopped ("stop" or "length")."""

    text: str
    finish_reason: str = "stop"
    match: str = ""  # how a cassette matched the request (x-ownloop-match, system_fingerprint)


Responder = Callable[[dict[str, Any]], Reply]
"""Answers one decoded chat-completions request, or raises a ``Fault``."""


class Fault(Exception):
    """A responder's way of making the endpoint misbehave on purpose."""


class HttpFault(Fault):
    """Answer with an HTTP error in OpenAI's error shape (e.g. 500, or 429 with Retry-After)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        error_type: str = "server_error",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type
        self.retry_after = retry_after


class BadRequest(HttpFault):
    """Answer 400 ``invalid_request_error``: a request this responder cannot answer (the
    message says what it looked for)."""

    def __init__(self, message: str) -> None:
        super().__init__(400, message, error_type="invalid_request_error")


class RawBody(Fault):
    """Answer with exactly these bytes (a broken or hostile server: HTML, bad UTF-8, odd JSON)."""

    def __init__(
        self,
        body: bytes,
        content_type: str = "application/json",
        status: int = 200,
        what: str = "raw body",
    ) -> None:
        super().__init__(what)
        self.body = body
        self.content_type = content_type
        self.status = status
        self.what = what


class Hang(Fault):
    """Say nothing for ``seconds`` (the server's stop cuts it short), then send ``then`` if any."""

    def __init__(self, seconds: float, then: Reply | None = None) -> None:
        super().__init__(f"hang for {seconds} s")
        self.seconds = seconds
        self.then = then


class DropConnection(Fault):
    """Close the connection without sending a byte of response."""


class StopListening(Fault):
    """Drop this connection and every open one, and refuse new ones for ``seconds`` (None: ever)."""

    def __init__(self, seconds: float | None = None) -> None:
        super().__init__("stop listening")
        self.seconds = seconds


class TaskStatement(msgspec.Struct, frozen=True):
    """The task as every agent states it (``ownloop.agents.base.task_text``)."""

    start_url: str
    prompt: str


# "You are interacting with a web application at {start_url}. Your task: {prompt}". The URL has
# no spaces; the prompt runs to the end of its line.
_TASK = re.compile(r"You are interacting with a web application at (\S+?)\. Your task: ([^\n]*)")


def _contents(request: dict[str, Any]) -> list[tuple[str, Any]]:
    messages = request.get("messages")
    if not isinstance(messages, list):
        return []
    return [(m.get("role", ""), m.get("content")) for m in messages if isinstance(m, dict)]


def request_text(request: dict[str, Any]) -> str:
    """All text of the request's messages, in order, one message per paragraph."""
    texts: list[str] = []
    for _, content in _contents(request):
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "text":
                    texts.append(str(part.get("text", "")))
    return "\n\n".join(texts)


def find_task(request: dict[str, Any]) -> TaskStatement | None:
    """The first task statement in the request's text, or None when there is none."""
    match = _TASK.search(request_text(request))
    if match is None:
        return None
    return TaskStatement(start_url=match.group(1), prompt=match.group(2).strip())


def assistant_turns(request: dict[str, Any]) -> int:
    """How many assistant messages the history holds (one per past step for most agents; see
    ``steps_taken`` for the step count of every agent)."""
    return sum(1 for role, _ in _contents(request) if role == "assistant")


# An agent that gives its history as text in one user turn (molmoweb) heads each past step
# "## Step N", numbered from 1 over the whole episode even when only the last few are shown.
_STEP_HEADING = re.compile(r"^## Step (\d+)$", re.MULTILINE)

# An agent that merges older steps into one assistant message (opencua) heads each "# Step N:".
_MERGED_STEP_HEADING = re.compile(r"^# Step (\d+):$", re.MULTILINE)

# An agent that lists the steps before its window of turns as "Step N: <summary>" (qwen3vl).
_LISTED_STEP = re.compile(r"^Step (\d+): ", re.MULTILINE)


def steps_taken(request: dict[str, Any]) -> int:
    """How many steps the session had taken when it sent ``request``; the step asked for is this
    plus one.

    One assistant message per past step (uitars, fara7b), or more steps than messages when older
    steps are merged into one under ``# Step N:`` headings (opencua): the larger of the two counts;
    the steps listed as ``Step N: ...`` lines before a window of turns (qwen3vl) plus the turns.
    No assistant message at all (molmoweb, whose one user turn holds the history as text): the
    last ``## Step N`` heading, else 0.
    """
    turns = assistant_turns(request)
    text = request_text(request)
    listed = _LISTED_STEP.findall(text)
    if turns and listed:  # qwen3vl: the steps before its window, then the window's turns
        return turns + int(listed[-1])
    if turns:
        return max([turns, *(int(n) for n in _MERGED_STEP_HEADING.findall(text))])
    headings = _STEP_HEADING.findall(text)
    return int(headings[-1]) if headings else 0


def template_switches(request: dict[str, Any]) -> dict[str, Any]:
    """The request's ``chat_template_kwargs`` (the switches vLLM hands its chat template, e.g.
    ``{"enable_thinking": false}``); {} when it sends none or not an object."""
    switches = request.get("chat_template_kwargs")
    return dict(switches) if isinstance(switches, dict) else {}


def thinking_requested(request: dict[str, Any]) -> bool:
    """Whether the request's chat template switches thinking on (``enable_thinking``, or the
    ``thinking`` key of vLLM's holo2 parser, set to true)."""
    switches = template_switches(request)
    return switches.get("enable_thinking") is True or switches.get("thinking") is True


def image_urls(request: dict[str, Any]) -> list[str]:
    urls: list[str] = []
    for _, content in _contents(request):
        if not isinstance(content, list):
            continue
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image_url":
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, dict) else image
                if isinstance(url, str):
                    urls.append(url)
    return urls


def last_image_size(request: dict[str, Any]) -> tuple[int, int] | None:
    """(width, height) of the request's last image, read from its PNG header; None if unknown.

    Only the first bytes of the data URL are decoded: the header is all that is needed.
    """
    urls = image_urls(request)
    if not urls:
        return None
    url = urls[-1]
    if not url.startswith("data:") or "," not in url:
        return None
    head = url.split(",", 1)[1][:44]  # 44 base64 characters are 33 bytes: signature + IHDR
    try:
        raw = base64.b64decode(head + "=" * (-len(head) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(raw) < 24 or raw[:8] != b"\x89PNG\r\n\x1a\n" or raw[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", raw[16:24])
    return int(width), int(height)
