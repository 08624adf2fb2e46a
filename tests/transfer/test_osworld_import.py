"""``ownloop import --format osworld`` on result trees written in OSWorld's layout: two models
(UI-TARS-style and OpenCUA-style responses), three domains, a damaged folder."""

from __future__ import annotations

import json
import shutil
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ownloop.cli import cli
from ownloop.replay.fold import fold
from ownloop.store import open_store
from ownloop.transfer.osworld_import import tell_agent
from ownloop.transfer.osworld_layout import Coordinates, find_examples
from ownloop.view.server import ViewServer
from tests.transfer.osworld_tree import (
    DAMAGED,
    EXAMPLES,
    INSTRUCTIONS,
    OPENCUA_MODEL,
    SCORES,
    UITARS_MODEL,
    opencua_steps,
    uitars_steps,
    write_tasks,
    write_tree,
)

UITARS_RUN = "osworld-ByteDance-Seed-UI-TARS-1.5-7B"
OPENCUA_RUN = "osworld-opencua-7b"


def _run(store: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Result]:
    """Both models' trees imported with their task files: (store, results folder, output)."""
    root = tmp_path_factory.mktemp("osworld")
    results = write_tree(root / "results")
    tasks = write_tasks(root / "evaluation_examples")
    store = root / "store"
    out = _run(store, "import", str(results), "--format", "osworld", "--tasks-dir", str(tasks))
    assert out.exit_code == 0, out.output
    return store, results, out


def test_two_models_become_two_runs_with_the_scores_of_result_txt(
    imported: tuple[Path, Path, Result],
) -> None:
    store, _, out = imported
    damaged = "/".join(("pyautogui/screenshot", OPENCUA_MODEL, *DAMAGED))
    lines = out.output.splitlines()
    assert f"imported 3 sessions from 3 folders into run {UITARS_RUN}: 3 finished" in lines
    assert f"imported 4 sessions from 4 folders into run {OPENCUA_RUN}: 4 finished" in lines
    assert "parsed 9 of 9 responses as uitars (100%)" in lines
    assert "parsed 12 of 12 responses as opencua (100%)" in lines
    skip = next(line for line in lines if line.startswith(damaged))
    assert "traj.jsonl line 4 (not JSON)" in skip and "result.txt (empty)" in skip
    assert "step_2_20250601@120006002468.png (missing)" in skip
    rows = (
        open_store(store)
        .sql("select run_id, task_id, score, passed, suite, prompt from sessions order by all")
        .rows
    )
    scores = {(run, task): score for run, task, score, *_ in rows}
    for model, run in ((UITARS_MODEL, UITARS_RUN), (OPENCUA_MODEL, OPENCUA_RUN)):
        for domain, example_id in EXAMPLES.items():
            assert scores[(run, example_id)] == SCORES[model][domain]
    assert scores[(OPENCUA_RUN, DAMAGED[1])] is None  # an empty result.txt is no score
    listed = json.loads(_run(store, "sessions", "--run", UITARS_RUN, "--format", "json").output)
    assert {r["task_id"]: r["score"] for r in listed} == {
        example_id: SCORES[UITARS_MODEL][domain] for domain, example_id in EXAMPLES.items()
    }
    prompts = {(task, suite): prompt for _, task, _, _, suite, prompt in rows}
    for domain, example_id in EXAMPLES.items():
        assert prompts[(example_id, f"osworld:{domain}")] == INSTRUCTIONS[domain]


def test_steps_keep_the_response_the_screen_seen_and_each_line(
    imported: tuple[Path, Path, Result],
) -> None:
    store, results, _ = imported
    opened = open_store(store)
    [(session_id,)] = opened.sql(
        "select session_id from sessions where run_id = $r and task_id = $t",
        {"r": UITARS_RUN, "t": EXAMPLES["chrome"]},
    ).rows
    session = fold(opened.session_events(session_id), session_id)
    steps = uitars_steps("chrome")
    assert [s.response for s in session.steps[:3]] == [s.response for s in steps]
    assert [type(a).__name__ for s in session.steps[:3] for a in s.actions] == [
        "Click",
        "TypeText",
        "Finish",
    ]
    folder = results / "pyautogui/screenshot" / UITARS_MODEL / "chrome" / EXAMPLES["chrome"]
    names = sorted(p.name for p in folder.glob("step_*.png"))
    # step 1 had no screen of its own (no step_0.png); step 2 saw the screen after step 1's
    # action; the screen after the last action is one more step
    assert session.steps[0].screenshot is None
    second = session.steps[1].screenshot
    assert second is not None and opened.get_blob(second.sha256) == (folder / names[0]).read_bytes()
    assert session.steps[3].screenshot is not None and not session.steps[3].calls
    lines = [e for e in session.evidence if e.name == "osworld_line"]
    assert len(lines) == 4  # step 2 ran two actions: two lines, one response
    fields = [json.loads(e.value_json or "{}")["fields"] for e in lines]
    assert [f["action"] for f in fields] == [a for s in steps for a in s.actions]
    assert fields[-1]["done"] is True
    names_by_time = sorted(names, key=lambda n: n.split("_", 2)[2])
    assert [opened.get_blob(e.sha256 or "") for e in lines] == [
        (folder / n).read_bytes() for n in names_by_time
    ]
    kinds = {e.name: e.media_type for e in session.evidence}
    assert kinds["osworld:recording.mp4"] == "video/mp4"
    assert kinds["osworld:runtime.log"] == "text/plain"
    task = json.loads(
        next(e.value_json for e in session.evidence if e.name == "osworld_task") or ""
    )
    assert task["evaluator"]["func"] == "exact_match" and task["snapshot"] == "chrome"


def test_reparse_lists_no_change_and_options_apply(imported: tuple[Path, Path, Result]) -> None:
    store, _, _ = imported
    for run in (UITARS_RUN, OPENCUA_RUN):
        out = _run(store, "replay", "--reparse", "--run", run)
        assert out.exit_code == 0, out.output
        assert out.output.splitlines()[-1].startswith("0 of ")
    # -o: OpenCUA's point (0.5, 0.5) read as model pixels, not as a fraction of the screen
    out = _run(store, "replay", "--reparse", "--run", OPENCUA_RUN, "-o", "fractions=false")
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[-1].startswith("3 of 16 steps changed (3 of 12 responses)")


def test_importing_again_skips_every_folder(
    imported: tuple[Path, Path, Result], tmp_path: Path
) -> None:
    store, results, _ = imported
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    out = _run(copy, "import", str(results), "--format", "osworld")
    assert (
        f"imported 0 sessions from 0 folders into run {UITARS_RUN}; 3 folders already imported"
        in out.output
    )


def test_compare_of_the_two_runs_names_the_flipped_task_and_its_first_divergent_step(
    imported: tuple[Path, Path, Result],
) -> None:
    store, _, _ = imported
    out = _run(store, "compare", UITARS_RUN, OPENCUA_RUN)
    assert out.exit_code == 0, out.output
    flipped = next(line for line in out.output.splitlines() if EXAMPLES["chrome"] + ":" in line)
    assert "solved by A only" in flipped
    assert "first divergent step A step 2 / B step 2: type 'bing' vs type 'b'" in flipped


def test_one_model_into_a_named_run_and_the_errors(tmp_path: Path) -> None:
    results = write_tree(tmp_path / "results", damaged=False)
    store = tmp_path / "store"
    out = _run(store, "import", str(results), "--format", "osworld", "--run", "mine")
    assert out.exit_code != 0
    assert "holds 2 runs" in out.output and "pass --model" in out.output
    out = _run(store, "import", str(results), "--format", "osworld", "--model", "nobody")
    assert "no folders of model 'nobody'" in out.output
    model = results / "pyautogui/screenshot" / UITARS_MODEL
    out = _run(store, "import", str(model), "--format", "osworld", "--run", "mine")
    assert out.exit_code == 0, out.output
    assert "imported 3 sessions from 3 folders into run mine: 3 finished" in out.output
    assert open_store(store).sql("select distinct model from runs").rows == [(UITARS_MODEL,)]


def test_the_agent_is_told_from_the_responses() -> None:
    assert tell_agent([s.response for s in uitars_steps("os")]) == "uitars"
    assert tell_agent([s.response for s in opencua_steps("os")]) == "opencua"
    assert tell_agent(["```python\npyautogui.click(10, 20)\n```"]) == "pyautogui"
    assert tell_agent(["hello"]) is None


def test_the_model_path_may_hold_slashes_and_the_folder_given_may_be_deep(tmp_path: Path) -> None:
    results = write_tree(tmp_path / "results", damaged=False)
    found, _ = find_examples(results / "pyautogui/screenshot/ByteDance-Seed")
    assert {where for _, where in found} == {
        Coordinates("pyautogui", "screenshot", UITARS_MODEL, domain, example_id)
        for domain, example_id in EXAMPLES.items()
    }


def test_compare_by_domain_and_the_compare_page(imported: tuple[Path, Path, Result]) -> None:
    store, _, _ = imported
    out = _run(store, "compare", UITARS_RUN, OPENCUA_RUN, "--by-domain")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert "domain chrome: 1 tasks; A 1/1 1.00; B 0/1 0.00; 1 flipped" in lines
    assert "domain gimp: 1 tasks; A 0/1 0.00; B 0/1 0.00; 0 flipped" in lines
    gimp = next(line for line in lines if line.startswith(f"  {EXAMPLES['gimp']} (gimp)"))
    assert "first divergent step A step 2 / B step 2: hotkey 'enter' vs click" in gimp
    with ViewServer(open_store(store), port=0) as url:
        query = urllib.parse.urlencode([("run", UITARS_RUN), ("run", OPENCUA_RUN)])
        with urllib.request.urlopen(f"{url}compare?{query}", timeout=30) as answer:
            page = answer.read().decode()
    assert 'id="domains"' in page
    chrome = page[page.index('data-domain="chrome"') :].split("</tr>")[0]
    assert "1/1 1.00" in chrome and "0/1 0.00" in chrome


def test_plain_pyautogui_responses_are_told_and_parsed_by_the_baseline_agent(
    tmp_path: Path,
) -> None:
    """OSWorld's baseline agent (plain pyautogui code, WAIT/DONE/FAIL): told from the responses
    and parsed by the ``pyautogui`` agent; ``--agent`` still overrides."""
    from tests.transfer.osworld_tree import Step, write_example

    folder = tmp_path / "results" / "pyautogui" / "screenshot" / "gpt-4o" / "os" / "x1"
    steps = [
        Step(
            "The icon is there.\n```python\npyautogui.click(10, 20)\n```",
            ("pyautogui.click(10, 20)",),
        ),
        Step("```DONE```", ("DONE",)),
    ]
    write_example(folder, steps, 1.0, colour=3)
    store = tmp_path / "store"
    out = _run(store, "import", str(tmp_path / "results"), "--format", "osworld")
    assert out.exit_code == 0, out.output
    assert "parsed 2 of 2 responses as pyautogui (100%)" in out.output
    rows = (
        open_store(store)
        .sql(
            "select s.agent, a.step, a.kind, a.x, a.y from actions a join sessions s "
            "using (session_id) order by a.step"
        )
        .rows
    )
    assert rows == [("pyautogui", 1, "click", 10.0, 20.0), ("pyautogui", 2, "finish", None, None)]
    out = _run(
        tmp_path / "other",
        "import",
        str(tmp_path / "results"),
        "--format",
        "osworld",
        "--agent",
        "opencua",
    )
    assert out.exit_code == 0, out.output
    assert "parsed 0 of 2 responses as opencua (0%)" in out.output


def test_the_summary_scores_an_example_without_result_txt_and_names_its_error(
    tmp_path: Path,
) -> None:
    from tests.transfer.osworld_tree import write_example

    # DIR holds two result_dirs, each with its own summary/results.json
    for name, score, error in (("run-a", 1.0, None), ("run-b", 0.0, "VM did not start")):
        result_dir = tmp_path / "all" / name
        model = result_dir / "pyautogui" / "screenshot" / name
        write_example(model / "os" / "x1", uitars_steps("os"), None, colour=4)
        entry = {"application": "os", "task_id": "x1", "score": score, "status": "success"}
        if error:
            entry |= {"status": "error", "err_message": error}
        (result_dir / "summary").mkdir()
        (result_dir / "summary" / "results.json").write_text(json.dumps([entry]))
    store = tmp_path / "store"
    out = _run(store, "import", str(tmp_path / "all"), "--format", "osworld")
    assert out.exit_code == 0, out.output
    rows = (
        open_store(store)
        .sql("select run_id, status, score, error from sessions order by run_id")
        .rows
    )
    assert rows == [
        ("osworld-run-a", "finished", 1.0, None),
        ("osworld-run-b", "error", 0.0, "VM did not start"),
    ]
