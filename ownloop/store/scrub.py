"""Credentials out of text before it enters the store: URL userinfo, Authorization headers, tokens.

One function per kind of input, all built on the same patterns:

- ``scrub_url(url)``: the URL without its ``user:password@`` part (and secret query values).
- ``scrub_text(text, secrets)``: any text (argv, an error, a response) with every credential form
  replaced by ``***``; each string in ``secrets`` (an API key, a password) is replaced wherever
  it appears.
- ``scrub_bytes(data, secrets)``: the same on raw bytes; bytes that are not UTF-8 stay exactly as
  they were, so a body that needs no scrubbing is kept byte for byte.
- ``mask_secrets(text, secrets)``: only the given secrets masked (a model's answer: a URL or a
  ``token=`` it writes is the model's data, which the agent must act on as written).
- ``url_secrets(url)``: the secrets a URL carries (its password, ``user:password`` and the Basic
  token made of them), to pass as ``secrets`` where the URL itself is not in the text.

Forms replaced: ``scheme://user:password@`` (the userinfo becomes ``***@``), ``Authorization:``
and ``Proxy-Authorization:`` values (in headers, JSON, Python reprs), ``Bearer <token>``,
``Basic <base64 of user:password>``, ``NAME=value`` where NAME ends in api_key, apikey, token,
secret, password or passwd (query strings, flags, form bodies), the same names as JSON keys, and
``sk-...`` style keys. Every pattern is linear in the text's length (a 5 MB body is scrubbed in
well under a second) and never crosses a quote, so scrubbed JSON stays JSON.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

__all__ = ["REDACTED", "mask_secrets", "scrub_bytes", "scrub_text", "scrub_url", "url_secrets"]

REDACTED = "***"

_MIN_SECRET = 4  # shorter exact secrets would blank ordinary words out of model text

# scheme://userinfo@ - starts only at the start of a word (so a long run of letters costs one
# scan) and the userinfo is bounded and has no '@', quote or space (so it never crosses JSON).
_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]{0,30}://)([^\s/?#@\"'<>\\]{1,512})@"
)
# The value is a scheme and a credential ("Basic dXNl..."), or a bare credential.
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization)(\\?[\"']?\s*[:=]\s*\\?[\"']?)"
    r"((?:[A-Za-z][A-Za-z0-9_-]*[ \t]+)?[^\s\"'\\,;&]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)([A-Za-z0-9._~+/\-]{4,}=*)")
_BASIC = re.compile(r"(?i)\b(basic)(\s+)([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])")
_NAMES = r"(?:api[_-]?key|apikey|token|secret|password|passwd)"
_ASSIGNED = re.compile(rf"(?i)({_NAMES}=)([^\s&\"'#;,)}}\]\\<>]+)")  # access_ etc. stays
_JSON_KEY = re.compile(
    r"(?i)([\"'][A-Za-z0-9_\-]{0,40}?(?:api[_-]?key|apikey|secret|password|passwd|"
    r"(?:access|auth|refresh|id|bearer|api)[_-]?token)[\"']\s*:\s*[\"'])([^\"'\\]+)"
)
_SK_KEY = re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{16,}")


def url_secrets(url: str) -> tuple[str, ...]:
    """The password of ``url``, its ``user:password`` and their Basic token (raw and decoded)."""
    try:
        parts = urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:
        return ()
    if username is None and password is None:
        return ()
    found: list[str] = []
    for user, word in (
        (username or "", password or ""),
        (unquote(username or ""), unquote(password or "")),
    ):
        pair = f"{user}:{word}"
        found += [word, pair, base64.b64encode(pair.encode()).decode()]
    return tuple(dict.fromkeys(s for s in found if len(s) >= _MIN_SECRET))


def scrub_url(url: str) -> str:
    """``url`` without ``user:password@`` (removed, not masked) and with secret query values
    masked; anything else is kept as written. Example: ``http://u:p@h:8000/v1`` -> ``http://h:8000/v1``.
    """
    cleaned = _USERINFO.sub(r"\1", url, count=1) if "@" in url else url
    return scrub_text(cleaned, url_secrets(url))


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` (of at least 4 characters) masked, and nothing else
    changed: for a model's own answer, whose ``token=...`` or URL is the model's data."""
    for secret in sorted(
        {s for s in secrets if s and len(s) >= _MIN_SECRET}, key=len, reverse=True
    ):
        text = text.replace(secret, REDACTED)
    return text


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every credential form (see the module doc) and each of ``secrets`` masked."""
    text = mask_secrets(text, secrets)
    if "://" in text:
        text = _USERINFO.sub(rf"\1{REDACTED}@", text)
    text = _AUTH_HEADER.sub(rf"\1\2{REDACTED}", text)
    text = _BEARER.sub(rf"\1\2{REDACTED}", text)
    text = _BASIC.sub(_basic, text)
    if "=" in text:
        text = _ASSIGNED.sub(rf"\1{REDACTED}", text)
    text = _JSON_KEY.sub(rf"\1{REDACTED}", text)
    return _SK_KEY.sub(REDACTED, text) if "sk-" in text else text


def scrub_bytes(data: bytes, secrets: Iterable[str] = ()) -> bytes:
    """``data`` scrubbed like text; bytes that are not valid UTF-8 are kept exactly."""
    text = data.decode("utf-8", "surrogateescape")
    scrubbed = scrub_text(text, secrets)
    return data if scrubbed == text else scrubbed.encode("utf-8", "surrogateescape")


def _basic(match: re.Match[str]) -> str:
    """Mask ``Basic <token>`` only when the token is base64 of ``user:password``: "basic idea"
    in model text is not a credential."""
    token = match[3]
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return match[0]
    return f"{match[1]}{match[2]}{REDACTED}" if b":" in decoded else match[0]
