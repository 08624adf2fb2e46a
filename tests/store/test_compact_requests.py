"""Journal format 2: a model call's line writes in full only the messages its stream has not
written yet, and every reader still gets the whole request."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from ownloop.replay.selection import fold_selected
from ownloop.store import Store
from ownloop.store import events as E
from ownloop.store.index import Index
from ownloop.store.journal import (
    BrokenReference,
    check_stream,
    read_lines,
    verify_stream,
)
from ownloop.store.lines import checksum
from tests.store.conftest import at

SYSTEM = "You are a GUI agent. " * 40  # a long system prompt, as the agents send
SHAS = [f"{i:02x}" * 32 for i in range(12)]


def _request(step: int) -> tuple[E.Message, ...]:
    """A UI-TARS-like request: system, task, past responses, the last three screenshots."""
    messages = [
        E.Message(role="system", parts=(E.TextPart(text=SYSTEM),)),
        E.Message(role="user", parts=(E.TextPart(text="Click OK"),)),
    ]
    for i in range(step):
        if i >= step - 2:
            messages.append(E.Message(role="user", parts=(E.ImagePart(sha256=SHAS[i]),)))
        messages.append(E.Message(role="assistant", parts=(E.TextPart(text=f"click {i}"),)))
    messages.append(E.Message(role="user", parts=(E.ImagePart(sha256=SHAS[step]),)))
    return tuple(messages)


def _call(step: int, attempt: int = 1, session: str = "s1") -> E.ModelCalled:
    return E.ModelCalled(
        at=at(step + attempt / 10),
        run_id="r1",
        session_id=session,
        step=step,
        call_id=f"{session}-c{step}",
        attempt=attempt,
        messages=_request(step),
        response=f"click {step}",
    )


def _session(store: Store, steps: int = 8, session: str = "s1") -> list[E.Event]:
    events: list[E.Event] = [
        E.SessionStarted(
            at=at(0),
            run_id="r1",
            session_id=session,
            task=E.Task(task_id="t", prompt="Click OK", start_url="http://x/"),
        )
    ]
    for step in range(steps):
        shot = E.ScreenshotTaken(
            at=at(step), run_id="r1", session_id=session, step=step, sha256=SHAS[step]
        )
        events += [shot, _call(step)]
        if step == 3:
            events.append(_call(step, attempt=2))  # a re-sample: the same request again
    with store.stream(session) as stream:
        stream.append(events[:4])  # the rest in several batches, as a recorder appends
        for i in range(4, len(events), 3):
            stream.append(events[i : i + 3])
    return events


def test_the_stream_writes_each_message_once_and_reads_back_every_request_in_full(
    store: Store,
) -> None:
    events = _session(store)
    path = store.journal_dir / "s1.jsonl"
    data = path.read_bytes()
    assert data.count(b"You are a GUI agent.") == 40  # the system prompt once (40 repeats)
    assert data.count(b'"click 2"') == 2  # the response, and once in the history
    assert b'"message_refs":[[' in data
    assert verify_stream(path) == []
    assert [line.event for line in read_lines(path)] == events
    assert list(store.read_stream("s1")) == events
    # From an offset too: what a reference points before it is read from the file.
    lines = list(read_lines(path))
    assert [line.event for line in read_lines(path, lines[-1].offset)] == events[-1:]
    full = sum(len(msgspec.json.encode(e)) for e in events)
    assert len(data) < full * 0.6


def test_the_index_and_its_readers_get_every_request_in_full(store: Store) -> None:
    events = _session(store)
    calls = [e for e in events if isinstance(e, E.ModelCalled)]
    assert store.session_events("s1") == events
    folded = fold_selected(store)["s1"]
    assert [c for step in folded.steps for c in step.calls] == calls
    rows = store.sql(
        "select step, attempt, messages, images, image_sha256s from model_calls "
        "order by step, attempt"
    ).rows
    assert len(rows) == len(calls)
    for (step, attempt, messages, images, shas), call in zip(rows, calls, strict=True):
        assert (step, attempt) == (call.step, call.attempt)
        assert json.loads(messages) == json.loads(msgspec.json.encode(call.messages))
        expected = [p.sha256 for m in call.messages for p in m.parts if isinstance(p, E.ImagePart)]
        assert (images, shas) == (len(expected), expected)
    # The table keeps the lines as written: a later call holds only its new messages.
    written = store.sql(
        "select json_array_length(messages), message_refs <> '[]' from model_called where step = 6"
    ).rows
    assert written == [(2, True)]  # the last response and the new screenshot


def test_a_batch_that_is_refused_leaves_no_message_to_refer_to(store: Store) -> None:
    with store.stream("s1") as stream:
        bad = msgspec.structs.replace(_call(1), latency_ms=float("nan"))  # encodes as null
        with pytest.raises(ValueError, match="would not decode"):
            stream.append([_call(0), bad])
        stream.append([_call(1)])
    data = (store.journal_dir / "s1.jsonl").read_bytes()
    assert b"message_refs" not in data  # its messages were written in full: nothing before
    assert list(store.read_stream("s1")) == [_call(1)]


def test_references_are_the_journals_own(store: Store) -> None:
    with store.stream("s1") as stream, pytest.raises(ValueError, match="message_refs"):
        stream.append([msgspec.structs.replace(_call(1), message_refs=((0, 0),))])


def _line(seq: int, prev: str, event: bytes) -> tuple[bytes, str]:
    total = checksum(prev, seq, event)
    return b'{"seq":%d,"prev":"%s","sum":"%s","event":%s}\n' % (
        seq,
        prev.encode(),
        total.encode(),
        event,
    ), total


def test_a_reference_to_no_such_message_is_found_by_verify_and_refused_by_readers(
    tmp_path: Path,
) -> None:
    # Lines with sound checksums whose reference points at the session's start, not a call.
    started = E.SessionStarted(
        at=at(0), run_id="r1", session_id="s1", task=E.Task(task_id="t", prompt="p", start_url="u")
    )
    first, prev = _line(1, "", msgspec.json.encode(started))
    compact = msgspec.structs.replace(_call(1), messages=(), message_refs=((0, 0),))
    second, _ = _line(2, prev, msgspec.json.encode(compact))
    path = tmp_path / "s1.jsonl"
    path.write_bytes(first + second)
    check = check_stream(path)
    assert [(p.line, p.kind) for p in check.problems] == [(2, "bad reference")]
    assert "refers to message 0 of the line at byte 0" in check.problems[0].detail
    with pytest.raises(BrokenReference, match="Run: ownloop verify"):
        list(read_lines(path))


def test_an_index_built_by_worker_processes_puts_the_same_requests_together(store: Store) -> None:
    _session(store)
    _session(store, session="s2")
    query = "select session_id, step, attempt, messages from model_calls order by all"
    Index(store).rebuild(processes=0)
    here = store.sql(query).rows
    assert Index(store).rebuild(processes=2).events == 2 * 18
    assert store.sql(query).rows == here
    assert len(here) == 18 and all(json.loads(row[3]) for row in here)


def _plan(store: Store, sql: str) -> str:
    return "\n".join(str(cell) for row in store.sql("explain " + sql).rows for cell in row)


def test_a_timing_query_of_model_calls_assembles_no_request(store: Store) -> None:
    _session(store)
    timing = _plan(
        store,
        "select s.agent, avg(m.latency_ms), sum(m.prompt_tokens) from model_calls m "
        "join sessions s using (session_id) group by s.agent",
    )
    # The requests are put back together by a window over the stream's calls: only a query that
    # reads them pays for it. This one scans the calls once, and no journal row.
    assert timing.count("model_called") == 1
    assert "journal" not in timing
    assert "WINDOW" not in timing.upper()
    assert "WINDOW" in _plan(store, "select sum(images) from model_calls").upper()
    assert "WINDOW" in _plan(store, "select messages from model_calls").upper()
    # model_requests puts them together by the same macro: the same holds for it
    assert "WINDOW" not in _plan(store, "select count(*), max(step) from model_requests").upper()
    assert "WINDOW" in _plan(store, "select messages from model_requests").upper()
    # and the sessions view's run facts are no distinct aggregate (planned as a CTE read twice,
    # joined after the calls' join: on every call, not on every session)
    assert "CTE" not in timing.upper()
