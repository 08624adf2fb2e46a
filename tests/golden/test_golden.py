"""Golden events written by older ownloop versions must decode forever, byte for byte."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from ownloop.store import events as E
from ownloop.store.journal import read_lines, verify_stream
from tests.golden.samples import GOLDEN_EVENTS, SAMPLES, journal_v2_events

_HERE = Path(__file__).parent
_LINES = GOLDEN_EVENTS.read_bytes().splitlines()
_decoder = msgspec.json.Decoder(E.Event)


def _tags(union: object) -> set[str]:
    return {t.__struct_config__.tag for t in union.__args__}  # type: ignore[attr-defined]


@pytest.mark.parametrize("line", _LINES, ids=[f"line{i + 1}" for i in range(len(_LINES))])
def test_golden_line_decodes_and_encodes_back_to_the_same_bytes(line: bytes) -> None:
    event = _decoder.decode(line)
    assert msgspec.json.encode(event) == line


def test_golden_lines_cover_every_event_action_and_op_kind() -> None:
    events = [_decoder.decode(line) for line in _LINES]
    assert {e.__struct_config__.tag for e in events} == _tags(E.Event)
    actions = {
        a.__struct_config__.tag for e in events if isinstance(e, E.ActionParsed) for a in e.actions
    }
    assert actions == _tags(E.Action)
    ops = {e.op.__struct_config__.tag for e in events if isinstance(e, E.BrowserActed)}
    assert ops == _tags(E.Op)


def test_samples_still_encode_to_their_golden_lines() -> None:
    # A sample whose encoding changed means a field was renamed, retyped or lost its default.
    encoded = {msgspec.json.encode(s) for s in SAMPLES}
    assert encoded <= set(_LINES)


def test_golden_journal_stream_reads_and_verifies() -> None:
    path = _HERE / "journal-v1.jsonl"
    assert verify_stream(path) == []
    assert [line.event for line in read_lines(path)] == list(SAMPLES)


def test_golden_format_2_journal_reads_every_request_in_full_and_verifies() -> None:
    # Written once by the format-2 writer (samples.write_journal_v2): compact requests.
    path = _HERE / "journal-v2.jsonl"
    assert path.read_bytes().count(b'"message_refs":') == 2
    assert verify_stream(path) == []
    assert [line.event for line in read_lines(path)] == journal_v2_events()
