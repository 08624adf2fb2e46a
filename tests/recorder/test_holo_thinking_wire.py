"""holo's thinking switch on the wire: each request carries ``chat_template_kwargs`` as a top-level
field of its JSON body (what vLLM and H Company's API read; the OpenAI client's ``extra_body``),
recorded with the call's sampling, and ``ownloop serve-model`` logs what it received.

The recorder's real ``ModelClient`` against the real scripted HTTP server (``ModelServer``); the
end-to-end recordings (the MiniWoB expert answering a think block only when asked) are
tests/recorder/test_record_new_agents.py's.
"""

from __future__ import annotations

from typing import Any

import pytest

from ownloop.agents import make_agent
from ownloop.errors import OwnloopError
from ownloop.modelserver import ModelServer, Reply
from ownloop.modelserver.chat import thinking_requested
from ownloop.recorder.call import CallContext, CallRequest
from ownloop.recorder.model import ModelClient
from ownloop.store.events import Message, Sampling, TextPart

ANSWER = '{"note": "", "thought": "Done.", "action": {"action": "answer", "content": "ok"}}'


def _send(options: dict[str, Any]) -> tuple[dict[str, Any], list[str], Sampling]:
    """One holo call (its own sampling) through the recorder's client to the scripted server:
    the JSON body the server decoded, its log lines, and the sampling recorded with the call."""
    agent = make_agent("holo", **options)
    seen: list[dict[str, Any]] = []
    lines: list[str] = []

    def answer(request: dict[str, Any]) -> Reply:
        seen.append(request)
        think = "<think>Asked to think.</think>\n" if thinking_requested(request) else ""
        return Reply(think + ANSWER)

    with ModelServer(answer, log=lines.append) as url:
        client = ModelClient(url, "holo", load_blob=lambda sha: b"", retries=0)
        outcome = client.call(
            CallRequest(
                (Message(role="user", parts=(TextPart(text="Task: say ok"),)),),
                agent.settings.sampling,
                CallContext("r", "s", 1),
            )
        )
    [request] = seen
    [event] = outcome.events
    assert event.response == outcome.text
    return request, lines, event.sampling


@pytest.mark.parametrize(
    ("options", "sent", "thinks"),
    [
        ({}, {"enable_thinking": False}, False),
        ({"thinking": True}, {"enable_thinking": True}, True),
        ({"thinking": True, "thinking_switch": "thinking"}, {"thinking": True}, True),
    ],
)
def test_each_request_sends_the_switch_and_the_call_records_it(
    options: dict[str, Any], sent: dict[str, bool], thinks: bool
) -> None:
    request, lines, sampling = _send(options)
    assert request["chat_template_kwargs"] == sent  # top level, as vLLM reads it
    assert "extra_body" not in request
    assert sampling.chat_template_kwargs == sent
    [line] = lines
    switch = ", ".join(f'"{key}": {str(value).lower()}' for key, value in sent.items())
    assert f"chat_template_kwargs={{{switch}}}" in line, line
    assert line.startswith("call 1 -> '<think>" if thinks else "call 1 -> '{"), line
    # the agent reads the think block as the step's reasoning, the JSON's thought after it
    agent = make_agent("holo", **options)
    answered = ("<think>Asked to think.</think>\n" if thinks else "") + ANSWER
    thought = agent.parse(answered, (1280, 800)).thought
    assert thought == ("Asked to think.\nDone." if thinks else "Done.")


def test_no_switch_sends_no_field() -> None:
    request, lines, sampling = _send({"thinking_switch": "none"})
    assert "chat_template_kwargs" not in request
    assert sampling.chat_template_kwargs is None
    assert "chat_template_kwargs" not in lines[0]
    with pytest.raises(
        OwnloopError, match="^holo: thinking_switch must be one of enable_thinking, thinking, none"
    ):
        make_agent("holo", thinking_switch="reasoning")
