"""Issue 17: ``ownloop export --format sft-parquet`` (real CLI) on a store written through the API.

Each step's request holds the previous screenshot and the current one (a window of two, as an
agent's history does); the images are real PNGs. The Parquet is read with pyarrow, and with the
``datasets`` library when it is installed (it is no dependency of ownloop: that test is skipped
without it).
"""

from __future__ import annotations

import hashlib
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from ownloop.store import events as E
from ownloop.store import open_store
from tests.transfer.conftest import invoke_ownloop, png

T0 = datetime(2026, 3, 1, tzinfo=UTC)
SIZE = (96, 60)
STEPS = 3


def _store(root: Path, sessions: int = 2) -> Path:
    store = open_store(root)
    with store.stream() as stream:
        stream.append([E.RunStarted(at=T0, run_id="r1", agent="uitars", model="m")])
        for n in range(sessions):
            sid, at = f"s{n}", T0 + timedelta(minutes=n)
            events: list[E.Event] = [
                E.SessionStarted(
                    at=at,
                    run_id="r1",
                    session_id=sid,
                    agent="uitars",
                    model="m",
                    viewport=SIZE,
                    task=E.Task(task_id=f"t{n}", prompt="Click OK", start_url="http://x/"),
                )
            ]
            shots = [
                store.put_blob(png((40 * n + 30, 20 * step, 90), SIZE)) for step in range(STEPS + 1)
            ]
            for step in range(1, STEPS + 1):
                window = [E.ImagePart(sha256=sha) for sha in shots[max(step - 2, 0) : step]]
                request = (
                    E.Message(role="system", parts=(E.TextPart(text="You click."),)),
                    E.Message(role="user", parts=(E.TextPart(text="Click OK"), *window)),
                )
                events += [
                    E.ScreenshotTaken(
                        at=at,
                        run_id="r1",
                        session_id=sid,
                        step=step,
                        sha256=shots[step - 1],
                        width=SIZE[0],
                        height=SIZE[1],
                        url="http://x/",
                    ),
                    E.ModelCalled(
                        at=at,
                        run_id="r1",
                        session_id=sid,
                        step=step,
                        call_id=f"{sid}-{step}",
                        model="m",
                        messages=request,
                        response=f"Thought: OK.\nAction: click(start_box='({step},9)')",
                        prompt_tokens=100,
                        completion_tokens=9,
                        latency_ms=50.0,
                    ),
                    E.ActionParsed(
                        at=at,
                        run_id="r1",
                        session_id=sid,
                        step=step,
                        call_id=f"{sid}-{step}",
                        parser="ui-tars",
                        thought="OK.",
                        actions=(E.Click(x=float(step), y=9.0),),
                    ),
                ]
            events += [
                E.SessionEnded(
                    at=at,
                    run_id="r1",
                    session_id=sid,
                    status="finished",
                    steps=STEPS,
                    answer="done",
                ),
                E.SessionGraded(
                    at=at, run_id="r1", session_id=sid, grader="answer", score=1.0, passed=True
                ),
            ]
            stream.append(events)
    return root


def _export(store: Path, out: Path, *flags: str) -> list[dict[str, Any]]:
    result = invoke_ownloop(store, "export", "--format", "sft-parquet", *flags, "--out", str(out))
    assert result.returncode == 0, result.stderr
    return list(pq.read_table(out / "sft.parquet").to_pylist())


@pytest.mark.parametrize("form", ["chat", "native"])
def test_per_session_rows_hold_the_step_rows(tmp_path: Path, form: str) -> None:
    store = _store(tmp_path / "store")
    steps = _export(store, tmp_path / "steps", "--agent-format", form)
    sessions = _export(store, tmp_path / "sessions", "--agent-format", form, "--per-session")
    assert len(steps) == 2 * STEPS and len(sessions) == 2
    assert [row["id"] for row in sessions] == ["s0", "s1"]
    assert [s for row in sessions for s in row["steps"]] == steps
    assert {row["task_id"] for row in sessions} == {"t0", "t1"}
    for row in steps:
        placeholders = [p for m in row["messages"] for p in m["content"] if p["type"] == "image"]
        assert len(placeholders) == len(row["images"]) == min(row["step"], 2)
        for image in row["images"]:
            assert hashlib.sha256(image["bytes"]).hexdigest() == image["path"].split(".")[0]
        if form == "native":
            assert (
                json.loads(row["request"])["messages"][1]["content"][1]["image_url"]["url"]
                == row["images"][0]["path"]
            )
    features = json.loads(
        pq.read_schema(tmp_path / "sessions" / "sft.parquet").metadata[b"huggingface"]
    )["info"]["features"]
    assert features["steps"][0]["images"] == {"feature": {"_type": "Image"}, "_type": "Sequence"}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("flags", [(), ("--per-session",), ("--agent-format", "native")])
def test_the_datasets_library_loads_it_with_images_decoded(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    datasets = pytest.importorskip("datasets")
    from PIL import Image

    store = _store(tmp_path / "store")
    rows = _export(store, tmp_path / "out", *flags)
    loaded = datasets.load_dataset(
        "parquet",
        data_files=str(tmp_path / "out" / "sft.parquet"),
        split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    assert len(loaded) == len(rows)
    steps = (
        [s for row in loaded for s in row["steps"]] if flags == ("--per-session",) else list(loaded)
    )
    assert len(steps) == 2 * STEPS
    for step, row in zip(steps, (s for r in rows for s in r.get("steps", [r])), strict=True):
        assert step["id"] == row["id"] and step["target"] == row["target"]
        assert len(step["images"]) == len(row["images"]) > 0
        for image, kept in zip(step["images"], row["images"], strict=True):
            assert isinstance(image, Image.Image) and image.size == SIZE
            assert image.tobytes() == Image.open(io.BytesIO(kept["bytes"])).tobytes()
        assert step["messages"][-1] == {
            "role": "assistant",
            "content": [{"type": "text", "text": row["target"]}],
        }
