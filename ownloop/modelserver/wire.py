"""The JSON the server reads and writes: request checks, completions, stream chunks, errors.

Shapes follow OpenAI's chat-completions API, as vLLM serves it. Token counts are estimates
(about four characters a token, a fixed count per image): nothing here runs a tokenizer.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from ownloop.modelserver.chat import Reply

__all__ = [
    "IMAGE_TOKENS",
    "completion_body",
    "count_tokens",
    "error_body",
    "stream_body",
    "validate_request",
]

IMAGE_TOKENS = 1000
"""Prompt tokens counted per image (a 1280x800 screenshot is about 1,300 Qwen2.5-VL tokens)."""

_ROLES = {"system", "user", "assistant", "tool", "developer"}
_PART_TYPES = {"text", "image_url"}


def validate_request(request: Any) -> str | None:
    """What is wrong with a chat-completions body, in one line; None when it is well formed."""
    if not isinstance(request, dict):
        return "the body must be a JSON object"
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list"
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            return f"messages[{index}] needs a 'role' of {sorted(_ROLES)}"
        content = message.get("content")
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list):
            return f"messages[{index}].content must be a string or a list of parts"
        for part_index, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in _PART_TYPES:
                return f"messages[{index}].content[{part_index}] must be a text or image_url part"
    return None


def count_tokens(request: dict[str, Any]) -> int:
    """An estimate of the prompt's tokens: text characters / 4, plus IMAGE_TOKENS per image."""
    chars = images = 0
    for message in request.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if part.get("type") == "text":
                    chars += len(str(part.get("text", "")))
                else:
                    images += 1
    return (chars + 3) // 4 + images * IMAGE_TOKENS


def _completion_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _usage(request: dict[str, Any], reply: Reply) -> dict[str, int]:
    prompt, completion = count_tokens(request), _completion_tokens(reply.text)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _model(request: dict[str, Any]) -> str:
    model = request.get("model")
    return model if isinstance(model, str) else "ownloop-expert"


def completion_body(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A ``chat.completion`` object carrying the reply."""
    return {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": _model(request),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text},
                "logprobs": None,
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": _usage(request, reply),
        **({"system_fingerprint": reply.match} if reply.match else {}),
    }


def _pieces(text: str, size: int = 16) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def stream_body(request: dict[str, Any], reply: Reply) -> bytes:
    """The whole server-sent-event stream of the reply: role, content pieces, finish, [DONE].

    The reply is known before the first byte is sent, so the stream goes out with a
    Content-Length (keep-alive stays simple); a usage chunk follows when the request's
    ``stream_options.include_usage`` asks for it.
    """
    base = {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": _model(request),
        **({"system_fingerprint": reply.match} if reply.match else {}),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in _pieces(reply.text) if piece]
    chunks.append(chunk({}, reply.finish_reason))
    options = request.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        chunks.append({**base, "choices": [], "usage": _usage(request, reply)})
    lines = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks]
    lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def error_body(message: str, error_type: str, *, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": None}}
