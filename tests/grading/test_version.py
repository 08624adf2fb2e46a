"""``grader_version``: a hash of the grader's spec and of the code that grades."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ownloop.grading import make_grader
from ownloop.grading.version import grader_version


def test_the_same_spec_has_the_same_version_and_another_spec_another() -> None:
    one = grader_version(make_grader("answer:contains:42"))
    assert one == grader_version(make_grader("  answer:contains:42 "))
    assert len(one) == 16 and int(one, 16) >= 0
    assert one != grader_version(make_grader("answer:contains:43"))
    assert one != grader_version(make_grader("answer:exact:42"))


def test_a_plugin_edited_on_disk_changes_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "k_graders_version.py"
    module.write_text("def check(answer, evidence):\n    return answer == '42'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = grader_version(make_grader("python:k_graders_version:check"))
    assert before == grader_version(make_grader("python:k_graders_version:check"))
    module.write_text("def check(answer, evidence):\n    return answer in ('42', '42.0')\n")
    assert grader_version(make_grader("python:k_graders_version:check")) != before
    sys.modules.pop("k_graders_version", None)
