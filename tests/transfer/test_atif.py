"""Issue 17: ATIF export and import (the real CLI, in-process; real stores).

``atif/foreign.json`` is a hand-made trajectory in the shape another tool writes (a system
message, the task with a screenshot, tool calls of its own names, an observation with text and an
image, costs); its screenshots are drawn here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ownloop.replay.fold import fold
from ownloop.store import open_store
from ownloop.store.events import Click, Finish
from ownloop.transfer.atif import SCHEMA_VERSION, read_trajectory
from tests.pixels import image_pixels
from tests.transfer.conftest import invoke_ownloop, png

FOREIGN = Path(__file__).parent / "atif" / "foreign.json"


def _foreign(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(FOREIGN, folder / "foreign.json")
    (folder / "screens").mkdir()
    (folder / "screens" / "0001.png").write_bytes(png((200, 40, 40), (800, 600)))
    (folder / "screens" / "0002.png").write_bytes(png((40, 200, 40), (800, 600)))
    return folder / "foreign.json"


def _only_session(store: Path) -> Any:
    rows = open_store(store).sql("select session_id from sessions").rows
    assert len(rows) == 1
    return fold(open_store(store).session_events(rows[0][0]))


def test_a_foreign_trajectory_imports_as_a_run(tmp_path: Path) -> None:
    file = _foreign(tmp_path / "in")
    store = tmp_path / "store"
    result = invoke_ownloop(store, "import", "--format", "atif", str(file), "--run", "theirs")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "foreign.json: 1 user/system messages after the first not kept",
        "imported 1 ATIF trajectory into run theirs",
    ]
    session = _only_session(store)
    assert (session.run_id, session.agent, session.model) == (
        "theirs",
        "web-operator",
        "operator-large",
    )
    assert session.task is not None and session.task.prompt == (
        "Add the blue mug to the cart and tell me the cart total."
    )
    assert session.viewport == (800, 600)
    assert [s.step for s in session.steps] == [1, 2, 3]
    first, second, third = session.steps
    assert first.actions == (Click(x=412, y=300),)
    assert first.thought == "The Add button of the blue mug is at (412, 300)."
    assert first.calls[0].prompt_tokens == 1520 and first.calls[0].completion_tokens == 41
    assert first.screenshot is not None and second.screenshot is not None
    assert (first.screenshot.width, first.screenshot.height) == (800, 600)
    assert second.parsed is not None and second.parsed.error is not None
    assert "'read_page' is not an ownloop action" in second.parsed.error
    assert third.actions == (Finish(answer="$12.50"),)
    assert session.status == "finished" and session.answer == "$12.50"

    out = tmp_path / "out"
    exported = invoke_ownloop(store, "export", "--format", "atif", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    again = read_trajectory((out / "browse-7f3a-0001.json").read_bytes())
    assert again.session_id == "browse-7f3a-0001" and again.schema_version == SCHEMA_VERSION
    assert [s.source for s in again.steps] == ["user", "agent", "agent", "agent"]


def _broken(change: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(FOREIGN.read_text())
    if change == "version":
        value["schema_version"] = "ATIF-2"
    elif change == "ids":
        value["steps"][2]["step_id"] = 7
    elif change == "user-tools":
        value["steps"][1]["tool_calls"] = []
    elif change == "call-id":
        value["steps"][2]["observation"]["results"][0]["source_call_id"] = "nope"
    elif change == "type":
        value["steps"][2]["metrics"]["prompt_tokens"] = "many"
    return value


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("version", "schema_version 'ATIF-2' is not ATIF-v1.N"),
        ("ids", "steps[2].step_id is 7, expected 3"),
        ("user-tools", "steps[1].tool_calls is set on a user step"),
        ("call-id", "steps[2].observation names tool call 'nope', which the step does not make"),
        ("type", "Expected `int | null`, got `str` - at `$.steps[2].metrics.prompt_tokens`"),
    ],
)
def test_a_file_that_breaks_the_spec_is_skipped_with_the_reason(
    tmp_path: Path, change: str, reason: str
) -> None:
    folder = tmp_path / "in"
    _foreign(folder)
    (folder / "foreign.json").write_text(json.dumps(_broken(change)))
    shutil.copy(FOREIGN, folder / "good.json")
    result = invoke_ownloop(tmp_path / "store", "import", "--format", "atif", str(folder))
    assert result.returncode == 0, result.stderr
    assert f"foreign.json: skipped (not ATIF: {reason})" in result.stdout.splitlines()
    assert "imported 1 ATIF trajectory into run atif-in" in result.stdout


def test_an_image_path_outside_the_folder_is_not_read(tmp_path: Path) -> None:
    file = _foreign(tmp_path / "in")
    (tmp_path / "secret.png").write_bytes(png((1, 2, 3)))
    value = json.loads(file.read_text())
    value["steps"][1]["message"][1]["source"]["path"] = "../secret.png"
    file.write_text(json.dumps(value))
    result = invoke_ownloop(tmp_path / "store", "import", "--format", "atif", str(file))
    assert (
        "foreign.json: image '../secret.png' skipped (not a relative path inside the "
        "folder)" in result.stdout
    )
    session = _only_session(tmp_path / "store")
    assert [s.step for s in session.steps if s.screenshot is not None] == [2]


def test_importing_the_same_files_again_adds_only_the_new_ones(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    _foreign(folder)
    store = tmp_path / "store"
    first = invoke_ownloop(store, "import", "--format", "atif", str(folder), "--run", "r")
    assert first.returncode == 0, first.stderr
    again = invoke_ownloop(
        store, "import", "--format", "atif", str(folder / "foreign.json"), "--run", "r"
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [
        "foreign.json: skipped (already imported into run r)",
        "imported 0 ATIF trajectories into run r",
    ]
    value = json.loads(FOREIGN.read_text())
    value["session_id"] = "browse-7f3a-0002"
    (folder / "second.json").write_text(json.dumps(value))
    shutil.copy(folder / "second.json", folder / "third.json")
    more = invoke_ownloop(store, "import", "--format", "atif", str(folder), "--run", "r")
    assert more.returncode == 0, more.stderr
    assert [line for line in more.stdout.splitlines() if "skipped" in line] == [
        "foreign.json: skipped (already imported into run r)",
        "third.json: skipped (already imported into run r)",
    ]
    assert "imported 1 ATIF trajectory into run r" in more.stdout
    assert open_store(store).sql("select count(*) from sessions where run_id = 'r'").rows == [(2,)]
    other = invoke_ownloop(
        store, "import", "--format", "atif", str(folder / "foreign.json"), "--run", "r2"
    )
    assert "imported 1 ATIF trajectory into run r2" in other.stdout


def test_no_trajectory_is_a_one_line_error(tmp_path: Path) -> None:
    result = invoke_ownloop(
        tmp_path / "store", "import", "--format", "atif", str(tmp_path / "missing")
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"Error: no file or folder {tmp_path / 'missing'}. Pass an "
        "ATIF .json file or a folder of them"
    )


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*(no clone|not found)")
def test_recorded_sessions_export_valid_and_round_trip_identically(
    recorded_store: Path, tmp_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    try:
        import atif as peer
    except ImportError:  # the test extra installs it
        peer = None
    result = invoke_ownloop(recorded_store, "export", "--format", "atif", "--out", str(first))
    assert result.returncode == 0, result.stderr
    files = sorted(first.glob("*.json"))
    assert len(files) == 8
    for file in files:
        trajectory = read_trajectory(file.read_bytes())  # types and the spec's rules
        if peer is not None:  # and the peer's own models (the atif package, ATIF v1.8)
            assert peer.Trajectory.model_validate_json(file.read_bytes()).schema_version == (
                "ATIF-v1.8"
            )
        agent_steps = [s for s in trajectory.steps if s.source == "agent"]
        assert agent_steps and all(s.metrics and s.metrics.prompt_tokens for s in agent_steps)
        assert all(
            (s.metrics.extra or {}).get("latency_ms", 0) > 0
            for s in agent_steps
            if s.metrics is not None
        )
        for step in trajectory.steps:
            for part in step.message if isinstance(step.message, list) else ():
                if part.source is not None:
                    assert (first / part.source.path).is_file()
    store = tmp_path / "store"
    imported = invoke_ownloop(store, "import", "--format", "atif", str(first), "--run", "back")
    assert imported.returncode == 0, imported.stderr
    assert "imported 8 ATIF trajectories into run back" in imported.stdout
    assert invoke_ownloop(store, "export", "--format", "atif", "--out", str(second)).returncode == 0
    # The recorded screenshots are compacted (lossless WebP): the first export writes PNGs made
    # from their pixels under the blobs' names, which the import stores under their own. So the
    # same trajectories with the same pixels in the same places, then byte for byte from there.
    assert _with_pixels(first) == _with_pixels(second)
    third = tmp_path / "third"
    again = tmp_path / "again"
    assert invoke_ownloop(again, "import", "--format", "atif", str(second)).returncode == 0
    assert invoke_ownloop(again, "export", "--format", "atif", "--out", str(third)).returncode == 0
    names = sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(third) for p in third.rglob("*") if p.is_file())
    for name in names:
        assert (second / name).read_bytes() == (third / name).read_bytes(), name


def _with_pixels(folder: Path) -> dict[str, str]:
    """Each file of an ATIF export, its PNGs' names replaced by their pixels' hash."""
    pixels = {
        p.relative_to(folder).as_posix(): image_pixels(p.read_bytes())
        for p in folder.rglob("*.png")
    }
    out = {}
    for file in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix != ".png"):
        text = file.read_text()
        for path, hashed in pixels.items():
            text = text.replace(path, hashed)
        out[file.relative_to(folder).as_posix()] = text
    assert pixels, "an export without a screenshot"
    out["*.png"] = " ".join(sorted(pixels.values()))  # the same images, as many
    return out


def test_sessions_come_a_batch_at_a_time_and_same_ids_keep_apart(tmp_path: Path) -> None:
    from ownloop.store.queries import Selection
    from ownloop.transfer.batches import each_session, picked

    folder = tmp_path / "in"
    _foreign(folder)
    for number in range(4):  # the same trajectory id, each file its own (a copy is skipped)
        value = json.loads(FOREIGN.read_text())
        value["steps"][1]["message"][0]["text"] += f" (copy {number})"
        (folder / f"copy-{number}.json").write_text(json.dumps(value))
    store = tmp_path / "store"
    assert (
        "imported 5 ATIF trajectories"
        in invoke_ownloop(store, "import", "--format", "atif", str(folder)).stdout
    )
    ids = picked(open_store(store), Selection())
    assert [s.session_id for s in each_session(open_store(store), ids, batch=2)] == ids
    for batch, lookup in ((2, 3), (3, 2), (1, 5), (5, 1)):  # places asked 'lookup' at once
        assert [s.session_id for s in each_session(open_store(store), ids, batch, lookup)] == ids
    out = tmp_path / "out"
    assert invoke_ownloop(store, "export", "--format", "atif", "--out", str(out)).returncode == 0
    names = sorted(p.stem for p in out.glob("*.json"))
    assert names == sorted(["browse-7f3a-0001", *ids[1:]])
