"""Network graders end to end, through the real CLI: ``ownloop record`` on the test site's shop
(whose buttons POST JSON to /api/cart with a bearer token) keeps each session's HAR and grades it
live; ``ownloop regrade`` grades the recorded HAR offline with the same result, and a changed
spec shows the check that changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from haralyzer import HarParser

from ownloop.cli import cli
from ownloop.modelserver import ModelServer, Reply
from ownloop.store import open_store

pytestmark = [pytest.mark.browser, pytest.mark.slow]

BLUE = {
    "type": "network",
    "method": "POST",
    "url": "{BASE}/api/cart",
    "status": 200,
    "request": {"product": "blue-mug"},
    "response": {"ok": True},
}


def tasks_file(path: Path, blue: dict[str, Any]) -> Path:
    path.write_text(
        json.dumps(
            {
                "setup": ["{BASE}/_admin/session-flags"],
                "tasks": [
                    {
                        "task_id": "blue",
                        "prompt": "Add the blue mug to the cart",
                        "start": "{BASE}/pages/shop.html",
                        "grader": blue,
                    },
                    # The agent adds the red mug here: the same grader fails.
                    {
                        "task_id": "red",
                        "prompt": "Add the red mug to the cart",
                        "start": "{BASE}/pages/shop.html",
                        "grader": BLUE,
                    },
                ],
            }
        )
    )
    return path


def reply(request: dict[str, Any]) -> Reply:
    if any(message.get("role") == "assistant" for message in request["messages"]):
        return Reply("Thought: Done.\nAction: finished(content='added')")
    x = 300 if "red mug" in json.dumps(request) else 100  # the red button, or the blue one
    return Reply(f"Thought: Add it.\nAction: click(start_box='({x},100)')")


def ownloop(store: Path, *args: str) -> Result:
    """The CLI in this process (its imports paid once, not per command)."""
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def events(store: Path, kind: str) -> list[dict[str, Any]]:
    return [
        event
        for path in sorted((store / "journal").glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if (event := json.loads(line)["event"])["kind"] == kind
    ]


def by_task(store: Path) -> dict[str, str]:
    return {e["session_id"]: e["task"]["task_id"] for e in events(store, "session_started")}


def test_network_graders_live_and_offline_from_the_har(
    tmp_path: Path, site: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # as a user in the folder of the tasks
    store = tmp_path / "store"
    tasks = tasks_file(tmp_path / "tasks.json", BLUE)
    with ModelServer(reply) as url:
        ownloop(
            store,
            "record",
            "uitars",
            "--tasks",
            str(tasks),
            "--base",
            site.base,
            "--endpoint",
            url,
            "--model",
            "m",
            "--settle",
            "0.3",
            "--retries",
            "0",
            "--run",
            "shop",
            "--workers",  # the two tasks one after another: one browser, not two
            "1",
        )
    tasks_of = by_task(store)
    recorded = {tasks_of[g["session_id"]]: g for g in events(store, "session_graded")}
    assert recorded["blue"]["passed"] is True, recorded["blue"]["details"]
    assert recorded["red"].get("passed", False) is False
    assert recorded["blue"]["details"].startswith(f"POST {site.base}/api/cart")
    blue_checks = {c["name"]: c for c in recorded["blue"]["checks"]}
    assert blue_checks["request $.product"] == {
        "name": "request $.product",
        "passed": True,
        "expected": '"blue-mug"',
        "actual": '"blue-mug"',
        "actual_normalized": '"blue-mug"',
    }
    red_checks = {c["name"]: c for c in recorded["red"]["checks"]}
    assert red_checks["request $.product"]["actual"] == '"red-mug"'
    assert red_checks["status"]["passed"] is True

    # The HAR: the API call with both bodies, and neither its bearer token nor its API key.
    [har_piece] = [
        e
        for e in events(store, "evidence_captured")
        if e["name"] == "network" and tasks_of[e["session_id"]] == "blue"
    ]
    har = open_store(store).get_blob(har_piece["sha256"])
    entries = json.loads(har)["log"]["entries"]
    [post] = [e for e in entries if e["request"]["method"] == "POST"]
    assert json.loads(post["request"]["postData"]["text"]) == {"product": "blue-mug", "qty": 1}
    assert json.loads(post["response"]["content"]["text"])["items"] == [
        {"product": "blue-mug", "qty": 1}
    ]
    headers = {h["name"]: h["value"] for h in post["request"]["headers"]}
    assert headers["authorization"] == "***"
    for secret in (b"tok-abcdef123456", b"k-12345678"):
        assert secret not in har
    # The page's own navigation, with the headers the browser sent (a navigation to
    # WebArena-Verified is a GET whose Accept asks for text/html), read by haralyzer too.
    page = next(
        e
        for e in HarParser(json.loads(har)).har_data["entries"]
        if e["request"]["url"].endswith("/pages/shop.html")
    )
    sent = {h["name"].lower(): h["value"] for h in page["request"]["headers"]}
    assert "text/html" in sent["accept"] and sent["sec-fetch-dest"] == "document", sent
    assert page["response"]["content"]["size"] > 0
    # Exported as a .har file beside the harness folder, byte for byte.
    ownloop(store, "export", "--run", "shop", "--out", str(tmp_path / "out"))
    assert (tmp_path / "out" / "blue" / "network.har").read_bytes() == har

    # Offline, from the HAR: the same verdicts, checks and grader versions; nothing flips.
    result = ownloop(store, "regrade", "--run", "shop", "--tasks", str(tasks))
    assert "flipped: 0" in result.stdout, result.stdout
    regraded = {
        tasks_of[g["session_id"]]: g
        for g in events(store, "session_graded")
        if g.get("source") == "regrade"
    }
    for task in ("blue", "red"):
        for field in ("passed", "score", "details", "checks", "grader", "grader_version"):
            assert regraded[task].get(field) == recorded[task].get(field), (task, field)

    # A changed spec: the flip names the check that changed, and how.
    changed = tasks_file(tmp_path / "changed.json", {**BLUE, "status": 201})
    result = ownloop(store, "regrade", "--run", "shop", "--tasks", str(changed))
    lines = result.stdout.splitlines()
    assert "flipped: 1" in lines[1], result.stdout
    flip = next(i for i, line in enumerate(lines) if "  blue  pass 1.00 -> fail 0.00" in line)
    assert lines[flip + 1].strip() == "status: pass -> fail, expected 201 (was 200), actual 200"
