"""Issue 17: ``ownloop export --format sft`` over the four agents' recorded runs (real CLI).

Each record's target is parsed here with the agent again (not through the exporter's own
check) and must give the actions the recorder acted on; every image a record names exists and its
bytes hash to its name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow
import pyarrow.json
import pyarrow.parquet as pq
import pytest

from ownloop.agents import make_agent
from ownloop.replay.fold import fold
from ownloop.store import open_store
from tests.pixels import blob_pixels, image_pixels
from tests.transfer.conftest import invoke_ownloop

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:.*(no clone|not found)"),
]


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _recorded_actions(store: Path, record: dict[str, Any]) -> tuple[Any, tuple[int, int]]:
    session = fold(open_store(store).session_events(record["session_id"]))
    step = next(s for s in session.steps if s.step == record["step"])
    assert step.parsed is not None and step.parsed.call_id == record["call_id"]
    shot = step.screenshot
    assert shot is not None
    return step.parsed.actions, (shot.width, shot.height)


@pytest.mark.parametrize("form", ["chat", "native"])
def test_every_target_parses_back_to_the_recorded_actions(
    recorded_store: Path, tmp_path: Path, form: str
) -> None:
    out = tmp_path / "sft"
    result = invoke_ownloop(
        recorded_store, "export", "--format", "sft", "--agent-format", form, "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    records = _records(out / "sft.jsonl")
    assert {r["agent"] for r in records} == {"uitars", "opencua", "fara7b", "molmoweb"}
    assert f"re-parse: all {len(records)} targets give back the recorded actions" in result.stdout
    assert "left out" not in result.stdout  # every recorded step parsed
    agents = {name: make_agent(name) for name in {r["agent"] for r in records}}
    for record in records:
        actions, size = _recorded_actions(recorded_store, record)
        target = (
            record["messages"][-1]["content"][0]["text"] if form == "chat" else record["target"]
        )
        assert agents[record["agent"]].parse(target, size).actions == actions, record["id"]
        store = open_store(recorded_store)
        for path in record["images"]:  # named by the blob, with its pixels (compacted or not)
            data = (out / path).read_bytes()
            assert image_pixels(data) == blob_pixels(store, Path(path).stem)


def test_chat_form_places_images_in_order_and_native_form_is_the_request_as_sent(
    recorded_store: Path, tmp_path: Path
) -> None:
    chat, native = tmp_path / "chat", tmp_path / "native"
    for form, out in (("chat", chat), ("native", native)):
        assert (
            invoke_ownloop(
                recorded_store,
                "export",
                "--format",
                "sft",
                "--agent-format",
                form,
                "--out",
                str(out),
            ).returncode
            == 0
        )
    for c, n in zip(_records(chat / "sft.jsonl"), _records(native / "sft.jsonl"), strict=True):
        assert c["id"] == n["id"]
        placeholders = [p for m in c["messages"] for p in m["content"] if p["type"] == "image"]
        assert len(placeholders) == len(c["images"]) and c["images"] == n["images"]
        urls = [
            p["image_url"]["url"]
            for m in n["request"]["messages"]
            if isinstance(m["content"], list)
            for p in m["content"]
            if p["type"] == "image_url"
        ]
        assert urls == n["images"]
        assert n["request"]["model"] == "expert" and "data:" not in json.dumps(n)
        assert c["messages"][-1] == {
            "role": "assistant",
            "content": [{"type": "text", "text": n["target"]}],
        }
        assert c["messages"][:-1][0]["role"] == n["request"]["messages"][0]["role"]
    # Issue 30: the chat form has one content shape, a list of parts, so pyarrow's JSON reader
    # (which refuses a field that is a string in one record and a list in another) loads it.
    table = pyarrow.json.read_json(chat / "sft.jsonl")
    assert table.num_rows == len(_records(chat / "sft.jsonl"))
    content = table.schema.field("messages").type.value_type.field("content").type
    assert pyarrow.types.is_list(content), content


def test_per_session_and_parquet(recorded_store: Path, tmp_path: Path) -> None:
    steps = invoke_ownloop(
        recorded_store, "export", "--format", "sft", "--out", str(tmp_path / "steps")
    )
    per = invoke_ownloop(
        recorded_store,
        "export",
        "--format",
        "sft",
        "--per-session",
        "--out",
        str(tmp_path / "sessions"),
    )
    assert per.returncode == 0, per.stderr
    sessions = _records(tmp_path / "sessions" / "sft.jsonl")
    assert len(sessions) == 8
    assert [s for r in sessions for s in r["steps"]] == _records(tmp_path / "steps" / "sft.jsonl")
    assert "8 records (sessions, chat form)" in per.stdout and steps.returncode == 0

    parquet = invoke_ownloop(
        recorded_store,
        "export",
        "--format",
        "sft-parquet",
        "--agent-format",
        "native",
        "--out",
        str(tmp_path / "pq"),
    )
    assert parquet.returncode == 0, parquet.stderr
    table = pq.read_table(tmp_path / "pq" / "sft.parquet")
    features = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
    assert features["images"] == {"feature": {"_type": "Image"}, "_type": "Sequence"}
    rows = table.to_pylist()
    assert len(rows) == len(_records(tmp_path / "steps" / "sft.jsonl"))
    store = open_store(recorded_store)
    for row in rows:
        for image in row["images"]:
            assert image_pixels(image["bytes"]) == blob_pixels(store, image["path"].split(".")[0])
        assert json.loads(row["request"])["messages"] and row["target"]
        assert row["messages"][-1]["content"][0]["text"] == row["target"]


def test_the_default_selection_is_passed_and_counted(recorded_store: Path, tmp_path: Path) -> None:
    result = invoke_ownloop(
        recorded_store,
        "export",
        "--format",
        "sft",
        "--where",
        "not passed",
        "--out",
        str(tmp_path / "none"),
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: no sessions match the selection. List them with: ownloop --store "
        f'{recorded_store} sql "select session_id, run_id, passed, counted from sessions"'
    )
    one = invoke_ownloop(
        recorded_store,
        "export",
        "--format",
        "sft",
        "--where",
        "agent = 'molmoweb' and task_id like 'click%'",
        "--out",
        str(tmp_path / "one"),
    )
    assert one.returncode == 0, one.stderr
    assert {r["agent"] for r in _records(tmp_path / "one" / "sft.jsonl")} == {"molmoweb"}
