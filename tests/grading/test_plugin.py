"""Plug-in graders: a real module of functions, imported by ``python:MODULE:FUNCTION``."""

from __future__ import annotations

import pytest

from ownloop.grading import Grade, GraderSpecError, PythonGrader, make_grader
from tests.grading.conftest import evidence

DONE = (evidence("final_url", "http://h/done"),)


@pytest.mark.parametrize(
    ("function", "answer", "grade"),
    [
        ("says_42", "it is 42", Grade(1.0, True, "plug-in returned True")),
        ("says_42", "it is 41", Grade(0.0, False, "plug-in returned False")),
        ("says_42", None, Grade(0.0, False, "plug-in returned False")),
        ("full_grade", "", Grade(0.5, True, "saw 1 pieces")),
        ("url_score", "", Grade(1.0, True, "plug-in returned score 1")),
        (
            "boom",
            "",
            Grade(
                0.0, False, "python:ownloop_test_graders:boom raised RuntimeError: plug-in broke"
            ),
        ),
        (
            "returns_text",
            "",
            Grade(0.0, False, "plug-in returned 'yes'; return a Grade, a bool or a float"),
        ),
        ("returns_nan", "", Grade(0.0, False, "plug-in returned a non-finite score nan")),
        (
            "returns_huge",
            "",
            Grade(0.0, False, "plug-in returned a non-finite score 1" + "0" * 56 + "..."),
        ),
        (
            "returns_odd_grade",
            "",
            Grade(1.0, True, "line one line two"),  # an int score, details made one line
        ),
        (
            "returns_text_score_grade",
            "",
            Grade(0.0, False, "plug-in returned a Grade with score '1'; use a float"),
        ),
        (
            "returns_bad_score_grade",
            "",
            Grade(0.0, False, "plug-in returned a Grade with score inf; use a float"),
        ),
    ],
)
def test_plugin_results(
    plugin_module: str, function: str, answer: str | None, grade: Grade
) -> None:
    assert make_grader(f"python:{plugin_module}:{function}").grade(answer, DONE) == grade


def test_plugin_partial_score_does_not_pass(plugin_module: str) -> None:
    grader = make_grader(f"python:{plugin_module}:url_score")
    assert grader.grade(None, ()) == Grade(0.25, False, "plug-in returned score 0.25")


def test_plugin_name_and_version(plugin_module: str) -> None:
    grader = make_grader(f'{{"type":"python","function":"{plugin_module}:versioned"}}')
    assert isinstance(grader, PythonGrader)
    assert (grader.name, grader.version) == (
        f'{{"type":"python","function":"{plugin_module}:versioned"}}',
        "2.1",
    )
    # without a version of its own, a function takes its module's __version__
    assert make_grader(f"python:{plugin_module}:says_42").version == "7"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "ownloop_no_such_module:f",
            "bad grader spec 'python:ownloop_no_such_module:f': cannot import "
            "'ownloop_no_such_module' (ModuleNotFoundError: "
            "No module named 'ownloop_no_such_module'). "
            "Use python:MODULE:FUNCTION, e.g. python:my_graders:check_total",
        ),
        (
            "ownloop_test_graders:missing",
            "bad grader spec 'python:ownloop_test_graders:missing': 'ownloop_test_graders' has no "
            "'missing'. Use python:MODULE:FUNCTION, e.g. python:my_graders:check_total",
        ),
        (
            "ownloop_test_graders:not_callable",
            "bad grader spec 'python:ownloop_test_graders:not_callable': "
            "ownloop_test_graders:not_callable is not callable. "
            "Use python:MODULE:FUNCTION, e.g. python:my_graders:check_total",
        ),
        (
            "ownloop_test_graders",
            "bad grader spec 'python:ownloop_test_graders': 'ownloop_test_graders' is not "
            "MODULE:FUNCTION. Use python:MODULE:FUNCTION, e.g. python:my_graders:check_total",
        ),
        (
            "os:system(1)",
            "bad grader spec 'python:os:system(1)': 'os:system(1)' is not MODULE:FUNCTION. "
            "Use python:MODULE:FUNCTION, e.g. python:my_graders:check_total",
        ),
    ],
)
def test_bad_plugin_specs(plugin_module: str, target: str, message: str) -> None:
    with pytest.raises(GraderSpecError) as caught:
        make_grader(f"python:{target}")
    assert str(caught.value) == message
