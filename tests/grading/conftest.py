"""Evidence builders and a real plug-in module on sys.path for the grading tests."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from ownloop.store.events import EvidenceCaptured

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
PLUGIN_MODULE = "ownloop_test_graders"

PLUGIN_SOURCE = '''
"""Plug-in graders used by tests/grading (written to a temporary directory)."""
from ownloop.grading import Grade, final_url

__version__ = "7"


def says_42(answer, evidence):
    return answer is not None and "42" in answer


def url_score(answer, evidence):
    return 1.0 if (final_url(evidence) or "").endswith("/done") else 0.25


def full_grade(answer, evidence):
    return Grade(0.5, True, f"saw {len(evidence)} pieces")


def boom(answer, evidence):
    raise RuntimeError("plug-in\\nbroke")


def returns_text(answer, evidence):
    return "yes"


def returns_nan(answer, evidence):
    return float("nan")


def returns_huge(answer, evidence):
    return 10**400


def returns_odd_grade(answer, evidence):
    return Grade(1, True, "line one\\nline two")


def returns_text_score_grade(answer, evidence):
    return Grade("1", True, "")


def returns_bad_score_grade(answer, evidence):
    return Grade(float("inf"), True, "")


def versioned(answer, evidence):
    return True


versioned.version = "2.1"
not_callable = 3
'''


def evidence(
    name: str, value: object = None, source: str = "", raw: str | None = None
) -> EvidenceCaptured:
    """One piece of evidence with ``value`` encoded as JSON (or ``raw`` text as is)."""
    value_json = raw if raw is not None else msgspec.json.encode(value).decode()
    return EvidenceCaptured(
        at=AT, run_id="run1", session_id="s1", name=name, value_json=value_json, source=source
    )


@pytest.fixture(scope="session")
def plugin_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The name of a real importable module of plug-in graders."""
    folder: Path = tmp_path_factory.mktemp("plugins")
    (folder / f"{PLUGIN_MODULE}.py").write_text(textwrap.dedent(PLUGIN_SOURCE))
    sys.path.insert(0, str(folder))
    yield PLUGIN_MODULE
    sys.path.remove(str(folder))
    sys.modules.pop(PLUGIN_MODULE, None)
