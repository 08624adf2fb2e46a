"""Property tests: graders never raise, whatever the answer and evidence; specs fail cleanly."""

from __future__ import annotations

import math

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ownloop.grading import Grade, GraderSpecError, make_grader
from ownloop.store.events import EvidenceCaptured
from tests.grading.conftest import AT

SPECS = [
    "answer:exact:42",
    "answer:normalized:Bob",
    "answer:contains:42",
    "answer:regex:(?i)^b.b$",
    "answer:number:3.5:0.01",
    "answer:number:-1e3:5%",
    'answer:any:["yes","y"]',
    "url:glob:*/done*",
    "url:regex:done$",
    "miniwob",
    'json:/r:$.items[0].name:eq:"Bob"',
    'json:/r:$.items:contains:{"name":"Bob"}',
    "json:/r:$[-1]:exists",
    '{"type":"json","capture":"http://h/r","path":"a.0.b","contains":"x"}',
    "none",
]
PLUGINS = [
    "says_42",
    "url_score",
    "full_grade",
    "boom",
    "returns_text",
    "returns_nan",
    "returns_huge",
    "returns_odd_grade",
    "returns_text_score_grade",
    "returns_bad_score_grade",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
value_json = st.one_of(
    st.none(),
    st.text(max_size=40),
    json_values.map(lambda value: msgspec.json.encode(value).decode()),
    st.fixed_dictionaries(
        {"raw_reward": json_values, "reward": json_values}, optional={"done": json_values}
    ).map(lambda value: msgspec.json.encode(value).decode()),
)
pieces = st.builds(
    lambda name, value, source, sha: EvidenceCaptured(
        at=AT, run_id="r", session_id="s", name=name, value_json=value, source=source, sha256=sha
    ),
    st.sampled_from(["final_url", "miniwob_reward", "capture", "title", "dom"])
    | st.text(max_size=10),
    value_json,
    st.sampled_from(["http://h/r", "/r", "http://[::1", "", "http://h/r?x=1"])
    | st.text(max_size=20),
    st.none() | st.just("ab" * 32),
)


def _is_clean(grade: object) -> bool:
    return (
        isinstance(grade, Grade)
        and isinstance(grade.score, float)
        and math.isfinite(grade.score)
        and isinstance(grade.passed, bool)
        and isinstance(grade.details, str)
        and "\n" not in grade.details
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=st.none() | st.text(max_size=200), evidence=st.lists(pieces, max_size=6))
def test_graders_never_raise(answer: str | None, evidence: list[EvidenceCaptured]) -> None:
    for spec in SPECS:
        grade = make_grader(spec).grade(answer, evidence)
        assert _is_clean(grade), (spec, grade)
        if not spec.startswith(("python", "none")):
            assert 0.0 <= grade.score <= 1.0


@settings(max_examples=50, deadline=None)
@given(answer=st.none() | st.text(max_size=50), evidence=st.lists(pieces, max_size=4))
def test_plugins_never_raise(
    plugin_module: str, answer: str | None, evidence: list[EvidenceCaptured]
) -> None:
    for function in PLUGINS:
        assert _is_clean(make_grader(f"python:{plugin_module}:{function}").grade(answer, evidence))


@settings(max_examples=200, deadline=None)
@given(
    spec=st.one_of(
        st.text(max_size=40),
        st.sampled_from(["answer:", "url:", "json:", "miniwob", "none", "{", '{"type":']).flatmap(
            lambda head: st.text(max_size=30).map(lambda tail: head + tail)
        ),
    ).filter(lambda spec: "python" not in spec)  # never import a fuzzed module
)
def test_any_spec_makes_a_grader_or_a_one_line_error(spec: str) -> None:
    try:
        grader = make_grader(spec)
    except GraderSpecError as error:
        assert str(error).startswith("bad grader spec ") and "\n" not in str(error)
    else:
        assert _is_clean(grader.grade("x", ()))
