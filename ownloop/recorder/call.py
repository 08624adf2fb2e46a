"""A model call's context and outcome: what every caller of a model (the live client, a cassette,
recorded judge answers) is given and returns, and the one place a ``ModelCalled`` is begun.

The loop says who a call is for once, as a ``CallContext``, and hands a caller one ``CallRequest``
(what to send, for whom, and when to give up); a caller adds only what the endpoint (or the
cassette) answered, with ``msgspec.structs.replace`` on the event ``CallContext.called`` begins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from ownloop.store.events import CallPurpose, Message, ModelCalled, Sampling, now
from ownloop.store.ids import new_id

__all__ = ["CallContext", "CallOutcome", "CallRequest", "ModelCaller"]


class CallContext(NamedTuple):
    """Who a model call is for: its run, session and step, which call of the step, and why.

    A judge's call belongs to no step of the session it judges: ``step = -1``,
    ``purpose = "judge"`` and ``attempt`` the repeat.
    """

    run_id: str
    session_id: str
    step: int
    attempt: int = 1  # 1 for the first call of a step, then each re-sample
    purpose: CallPurpose = "step"

    def called(
        self, messages: tuple[Message, ...], sampling: Sampling, *, model: str = ""
    ) -> ModelCalled:
        """The call's event as it starts (now, a new call id); the caller replaces the fields
        of what was answered. Each field of the context is the event's of the same name."""
        return ModelCalled(
            at=now(),
            call_id=new_id(),
            model=model,
            messages=messages,
            sampling=sampling,
            **self._asdict(),
        )


def _never() -> bool:
    return False


class CallRequest(NamedTuple):
    """One logical call as the loop asks for it: the messages and sampling to send, who the call
    is for, and ``should_stop``, read between transport retries (True: give up waiting)."""

    messages: tuple[Message, ...]
    sampling: Sampling
    context: CallContext
    should_stop: Callable[[], bool] = _never


class CallOutcome(NamedTuple):
    """The result of one logical call: the events of every attempt and the final answer."""

    events: list[ModelCalled]
    text: str | None  # None when every attempt failed
    finish_reason: str | None
    error: str | None


class ModelCaller(Protocol):
    """What the loop calls for a step's answer: ``ModelClient`` or a cassette of responses."""

    def call(self, request: CallRequest) -> CallOutcome: ...
