"""Graders: pure functions of a session's answer and captured evidence, named by a spec.

    grader = make_grader("answer:contains:42")
    grade = grader.grade(session.answer, session.evidence)   # Grade(score, passed, details)

See ``ownloop.grading.spec`` for the spec syntax.
"""

from ownloop.grading.answer import AnswerGrader, extract_numbers, normalize
from ownloop.grading.capture import JsonGrader
from ownloop.grading.evidence import final_url, latest_evidence, read_value
from ownloop.grading.grade import Check, Grade, Grader, GraderSpecError
from ownloop.grading.miniwob import MiniwobGrader
from ownloop.grading.network import NetworkGrader, wants_network, with_network
from ownloop.grading.plugin import PythonGrader
from ownloop.grading.spec import GRADER_TYPES, NoGrader, grade_session, make_grader
from ownloop.grading.url import UrlGrader

__all__ = [
    "GRADER_TYPES",
    "UNGRADED",
    "AnswerGrader",
    "Check",
    "Grade",
    "Grader",
    "GraderSpecError",
    "JsonGrader",
    "MiniwobGrader",
    "NetworkGrader",
    "NoGrader",
    "PythonGrader",
    "UrlGrader",
    "extract_numbers",
    "final_url",
    "grade_session",
    "latest_evidence",
    "make_grader",
    "normalize",
    "read_value",
    "wants_network",
    "with_network",
]

UNGRADED = frozenset({"endpoint_error", "env_error", "interrupted", "crashed"})
"""Statuses that say nothing about the agent (the endpoint, a Ctrl-C, a killed recorder): never
graded, at record time or in a regrade."""
