"""Replay calls the episode; it does not write into it (issue 26, item 5)."""

from __future__ import annotations

import re
from pathlib import Path

from ownloop.recorder.episode import Episode

PACKAGE = Path(__file__).resolve().parents[2] / "ownloop"


def test_an_episode_shows_only_its_step_methods() -> None:
    """Recording, replay, the guard and the fork drive an episode through these alone: its
    state (world, agent, history, counts) is its own."""
    public = {name for name in vars(Episode) if not name.startswith("_")}
    assert public == {"agent_step", "end", "ids", "observe", "run", "settle", "step"}


def test_no_module_outside_the_episode_reaches_into_one() -> None:
    reaching = [
        f"{path.relative_to(PACKAGE)}: {match.group(0)}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "episode.py"
        for match in re.finditer(r"\bepisode\._\w+", path.read_text())
    ]
    assert reaching == []
