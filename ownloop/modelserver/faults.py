"""Fault injection: an endpoint that misbehaves on purpose, then (optionally) behaves.

Syntax of ``--faults``: one or more phases separated by commas, each ``MODE[=ARG][:N]``::

    garbage            every call answers garbage
    500:2              the first 2 calls answer HTTP 500, then the expert answers
    429=3:1            the first call answers 429 with Retry-After: 3, then the expert
    hang=8:1           the first call says nothing for 8 s and closes, then the expert
    ok:2,drop:1        2 good answers, then one dropped connection, then good answers
    down=10:1          the first call: stop listening for 10 s (connections refused), then good

A phase without ``:N`` lasts for every remaining call (so it must be the last one). When the
phases are used up, the wrapped responder (the expert) answers. Modes:

========== ======================================================================
ok         answer normally (the wrapped responder)
slow       answer normally after ARG seconds (default 1)
garbage    prose without any action
truncated  a response cut off mid-action, with finish_reason "length"
huge       about 200 kB of text, finish_reason "length"
hostile    actions that try to run code; call i gets payload i (they cycle)
500        HTTP 500 in OpenAI's error shape
429        HTTP 429 with Retry-After: ARG seconds (default 1)
hang       no answer for ARG seconds (default 30), then the connection closes
drop       the connection is closed (reset) without any response
down       stop listening for ARG seconds (default: until the server stops); open
           connections are closed and new ones refused
========== ======================================================================

Hostile bodies (HTTP 200; the typed-field ones carry the wrapped responder's text where a
field still fits, so a client that keeps what fits can still act on it):

=========== =====================================================================
intcontent  ``message.content`` is the int 7
listcontent ``message.content`` is a list: a text part with the answer, then the int 7
intfinish   ``finish_reason`` is the int 7
strtokens   ``usage.prompt_tokens`` is the string "12"
nonjson     a plain-text body that is not JSON
html        an HTML page (a proxy's error page) with Content-Type text/html
badutf8     the completion's JSON with the bytes 0xFF 0xFE (invalid UTF-8) before the answer
surrogate   the completion's JSON with a lone surrogate escape ``\ud800`` before the answer
bigbody     a completion of about ARG MB (default 5) of text, finish_reason "length"
=========== =====================================================================
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import msgspec

from ownloop.errors import OwnloopError
from ownloop.modelserver import chat
from ownloop.modelserver.wire import completion_body

__all__ = [
    "FAULT_MODES",
    "HOSTILE_MARKER",
    "HOSTILE_REPLIES",
    "BODY_MODES",
    "FaultPhase",
    "FaultSpecError",
    "FaultyResponder",
    "parse_faults",
]

FAULT_MODES = (
    "ok",
    "slow",
    "garbage",
    "truncated",
    "huge",
    "hostile",
    "500",
    "429",
    "hang",
    "drop",
    "down",
    *(
        "intcontent",
        "listcontent",
        "intfinish",
        "strtokens",
        "nonjson",
        "html",
        "badutf8",
        "surrogate",
        "bigbody",
    ),
)

BODY_MODES = frozenset(FAULT_MODES[11:])
"""The modes that answer HTTP 200 with a hostile body (see the module doc)."""

HOSTILE_MARKER = "ownloop-pwned"
"""The file every hostile payload would create in the working directory if it ever ran."""

_TOUCH = f"open('{HOSTILE_MARKER}', 'w').write('pwned')"

HOSTILE_REPLIES = (
    # A box whose text is an expression: harmless only if boxes are read by a literal parser.
    f'Thought: Click it.\nAction: click(start_box=\'(__import__("os").system("touch '
    f"{HOSTILE_MARKER}\"), 1)')",
    # A non-literal argument value.
    f"Thought: Click it.\nAction: click(start_box=__import__('os').system('touch "
    f"{HOSTILE_MARKER}'))",
    # type(content=...) that closes its string and call, then appends code of its own.
    f"Thought: Type it.\nAction: type(content='hello'); {_TOUCH}; x=('')",
    f"Thought: Type it.\nAction: type(content='x\\')\\n{_TOUCH}\\n#')",
    # A drag whose end box calls a builtin; and exec hidden in a finished answer.
    f"Thought: Drag.\nAction: drag(start_box='(10,10)', end_box='(exec(\"{_TOUCH}\"), 5)')",
    f"Thought: Done.\nAction: finished(content='{{exec(\"{_TOUCH}\")}}')",
)

_GARBAGE = (
    "I think the best thing to do here is to look at the page more carefully.",
    "",
    "Action:",
    "Thought: hmm\nAction: teleport(start_box='(1,2)')",
    "\u0000\u0007 {]}} <|box_start|> ((((",
)
_TRUNCATED = "Thought: I should click the Submit button.\nAction: click(start_box='(31"
_HUGE = "Thought: " + "very long thoughts " * 11_000
_HTML = (
    b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n<body><h1>502 Bad "
    b"Gateway</h1><p>The upstream model server is unavailable.</p></body></html>\n"
)
_MARK = "\ue000"  # a private-use character the badutf8 body swaps for invalid bytes

_PHASE = re.compile(r"^(?P<mode>[a-z0-9]+)(?:=(?P<arg>[0-9]+(?:\.[0-9]+)?))?(?::(?P<n>[0-9]+))?$")


class FaultSpecError(OwnloopError):
    pass


class FaultPhase(msgspec.Struct, frozen=True):
    """One phase of a fault plan: ``mode`` for ``calls`` calls (None: all remaining calls)."""

    mode: str
    arg: float | None = None
    calls: int | None = None


def parse_faults(spec: str) -> tuple[FaultPhase, ...]:
    """Read ``MODE[=ARG][:N][,MODE[=ARG][:N]...]`` (see the module doc); raises FaultSpecError."""
    phases: list[FaultPhase] = []
    parts = [p.strip() for p in spec.split(",")]
    for index, part in enumerate(parts):
        match = _PHASE.match(part)
        if match is None or match["mode"] not in FAULT_MODES:
            raise FaultSpecError(
                f"bad fault phase {part!r}. Use MODE[=ARG][:N], comma-separated, with MODE one of "
                f"{', '.join(FAULT_MODES)} (e.g. --faults 500:2 or --faults hang=8:1)"
            )
        calls = int(match["n"]) if match["n"] is not None else None
        if calls is None and index < len(parts) - 1:
            raise FaultSpecError(
                f"fault phase {part!r} has no :N, so it never ends; give it a count or put it last"
            )
        arg = float(match["arg"]) if match["arg"] is not None else None
        phases.append(FaultPhase(mode=match["mode"], arg=arg, calls=calls))
    return tuple(phases)


class FaultyResponder:
    """Wraps a responder: the calls the phases cover misbehave, the others go to ``inner``.

    Calls are counted across all connections and threads, in arrival order.
    """

    def __init__(self, inner: chat.Responder, phases: tuple[FaultPhase, ...] | str) -> None:
        self.inner = inner
        self.phases = parse_faults(phases) if isinstance(phases, str) else phases
        self._lock = threading.Lock()
        self._calls = 0

    def phase_for(self, call: int) -> FaultPhase | None:
        """The phase covering call number ``call`` (0-based); None once the phases are used up."""
        start = 0
        for phase in self.phases:
            if phase.calls is None or call < start + phase.calls:
                return phase
            start += phase.calls
        return None

    def close(self) -> None:
        """Close the wrapped responder, if it has anything to close."""
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def __call__(self, request: dict[str, Any]) -> chat.Reply:
        with self._lock:
            call = self._calls
            self._calls += 1
        phase = self.phase_for(call)
        if phase is None or phase.mode == "ok":
            return self.inner(request)
        if phase.mode == "slow":  # a slow but good model: time for tests to act mid-session
            time.sleep(1.0 if phase.arg is None else phase.arg)
            return self.inner(request)
        if phase.mode in BODY_MODES:
            raise _hostile_body(phase, request, self.inner)
        return _misbehave(phase, call)


def _misbehave(phase: FaultPhase, call: int) -> chat.Reply:
    mode, arg = phase.mode, phase.arg
    if mode == "garbage":
        return chat.Reply(_GARBAGE[call % len(_GARBAGE)])
    if mode == "truncated":
        return chat.Reply(_TRUNCATED, finish_reason="length")
    if mode == "huge":
        return chat.Reply(_HUGE, finish_reason="length")
    if mode == "hostile":
        return chat.Reply(HOSTILE_REPLIES[call % len(HOSTILE_REPLIES)])
    if mode == "500":
        raise chat.HttpFault(500, "the model server failed (ownloop fault injection)")
    if mode == "429":
        raise chat.HttpFault(
            429,
            "rate limit reached (ownloop fault injection)",
            error_type="rate_limit_error",
            retry_after=1.0 if arg is None else arg,
        )
    if mode == "hang":
        raise chat.Hang(30.0 if arg is None else arg)
    if mode == "drop":
        raise chat.DropConnection()
    if mode == "down":
        raise chat.StopListening(arg)
    raise FaultSpecError(f"unknown fault mode {mode!r}")  # parse_faults lets none through


def _hostile_body(
    phase: FaultPhase, request: dict[str, Any], inner: chat.Responder
) -> chat.RawBody:
    """The RawBody fault of a hostile-body mode: exact bytes, sent with HTTP 200."""
    mode = phase.mode
    if mode == "nonjson":
        return chat.RawBody(b"upstream says: everything is fine\n", "text/plain", what=mode)
    if mode == "html":
        return chat.RawBody(_HTML, "text/html; charset=utf-8", what=mode)
    if mode == "bigbody":
        megabytes = 5.0 if phase.arg is None else phase.arg
        text = "Thought: " + "x" * int(megabytes * 1_000_000)
        body = completion_body(request, chat.Reply(text, finish_reason="length"))
        return chat.RawBody(json.dumps(body).encode(), what=mode)
    reply = inner(request)
    body = completion_body(request, reply)
    choice, usage = body["choices"][0], body["usage"]
    if mode == "intcontent":
        choice["message"]["content"] = 7
    elif mode == "listcontent":
        choice["message"]["content"] = [{"type": "text", "text": reply.text}, 7]
    elif mode == "intfinish":
        choice["finish_reason"] = 7
    elif mode == "strtokens":
        usage["prompt_tokens"] = str(usage["prompt_tokens"])
    elif mode == "surrogate":  # json.dumps escapes the lone surrogate as \ud800
        choice["message"]["content"] = "\ud800" + reply.text
    elif mode == "badutf8":
        choice["message"]["content"] = _MARK + reply.text
        data = json.dumps(body, ensure_ascii=False).encode()
        return chat.RawBody(data.replace(_MARK.encode(), b"\xff\xfe"), what=mode)
    return chat.RawBody(json.dumps(body).encode(), what=mode)
