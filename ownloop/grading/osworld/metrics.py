"""OSWorld's metrics as pure functions of the values its getters read (no I/O, no clock).

Each takes the result value (text, or a rule's JSON), the expected value and the task's
options for that metric, and returns a score in [0, 1]. Values arrive as the ``osworld_getter``
evidence keeps them (``text`` for files and command output, ``value`` for rules, the file's
bytes when it is not text: office files, read by :mod:`.office`, :mod:`.sheets` and
:mod:`.slides`). A metric not in :data:`METRICS`, or one that raises :class:`MetricUnsupported`
(an absent ``osworld`` extra, an option ownloop lacks), is graded ``unsupported: ...`` by the
grader, never pass or fail.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from difflib import SequenceMatcher
from typing import Any

from ownloop.grading.osworld.errors import MetricError, MetricUnsupported
from ownloop.grading.osworld.office import (
    compare_docx_files,
    compare_docx_lines,
    compare_docx_tables,
    compare_line_spacing,
    contains_page_break,
    has_page_numbers_in_footers,
    is_first_line_centered,
)
from ownloop.grading.osworld.sheets import compare_table
from ownloop.grading.osworld.slides import compare_pptx_files

__all__ = ["METRICS", "Metric", "MetricError", "MetricUnsupported"]

Metric = Callable[[Any, Any, Mapping[str, Any]], float]


def _text(value: Any, what: str = "result") -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):  # a text file over the inline limit, read from its blob
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise MetricError(f"the {what} is not UTF-8 text") from None
    raise MetricError(f"the {what} is not text")


def _rules(expected: Any) -> Mapping[str, Any]:
    if isinstance(expected, Mapping):
        return expected
    raise MetricError("the expected value is not a rule object")


def exact_match(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    want = _rules(expected).get("expected")
    return float(_text(result) == want)


def fuzzy_match(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    want = _rules(expected).get("expected")
    return SequenceMatcher(None, _text(result), _text(want, "expected value")).ratio()


def check_include_exclude(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    rules = _rules(expected)
    text = _text(result)
    include = rules.get("include") or []
    exclude = rules.get("exclude") or []
    return float(all(str(s) in text for s in include) and not any(str(s) in text for s in exclude))


def check_list(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    """Every ``expect`` pattern matches some line of the result, no ``unexpect`` pattern does."""
    rules = _rules(expected)
    lines = _text(result).splitlines()

    def found(pattern: str) -> bool:
        try:
            compiled = re.compile(pattern)
        except re.error as error:
            raise MetricError(f"bad pattern {pattern[:40]!r}: {error}") from None
        return any(compiled.search(line) for line in lines)

    expect = [str(p) for p in rules.get("expect") or []]
    unexpect = [str(p) for p in rules.get("unexpect") or []]
    return float(all(found(p) for p in expect) and not any(found(p) for p in unexpect))


def is_in_list(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    return float(_text(result).strip() in [str(v) for v in _rules(expected).get("expected", [])])


def _file_text(value: Any, options: Mapping[str, Any], what: str) -> str:
    text = _text(value, what)
    if options.get("ignore_blanks"):
        text = re.sub(r"[\t\n ]+", "\n", text).strip()
    if options.get("ignore_case"):
        text = text.lower()
    return text


def compare_text_file(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    return float(
        _file_text(result, options, "result file") == _file_text(expected, options, "expected file")
    )


def diff_text_file(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    return SequenceMatcher(
        None, _text(result, "result file"), _text(expected, "expected file")
    ).ratio()


def compare_csv(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    def rows(value: Any, what: str) -> list[str]:
        return [line.strip() for line in _text(value, what).strip().splitlines()]

    return float(rows(result, "result file") == rows(expected, "expected file"))


def _json(value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise MetricError(f"the {what} is not JSON") from None


def check_direct_json_object(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    """Each key of the rule's ``expected`` object has that value in the result's JSON object."""
    return _has_expected(_json(result, "result"), expected)


def check_json_settings(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    """Each key of the rule's ``expected`` object has that value in the result JSON file."""
    return _has_expected(_json(result, "result file"), expected)


def _has_expected(got: Any, expected: Any) -> float:
    want = _rules(expected).get("expected")
    if not isinstance(got, dict) or not isinstance(want, dict):
        return 0.0
    return float(all(got.get(k) == v for k, v in want.items()))


def compare_json_files(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    return float(_json(result, "result file") == _json(expected, "expected file"))


METRICS: dict[str, Metric] = {
    "exact_match": exact_match,
    "fuzzy_match": fuzzy_match,
    "check_include_exclude": check_include_exclude,
    "check_list": check_list,
    "is_in_list": is_in_list,
    "compare_text_file": compare_text_file,
    "diff_text_file": diff_text_file,
    "compare_csv": compare_csv,
    "check_direct_json_object": check_direct_json_object,
    "check_json_settings": check_json_settings,
    "compare_json_files": compare_json_files,
    "compare_table": compare_table,
    "compare_pptx_files": compare_pptx_files,
    "compare_docx_files": compare_docx_files,
    "compare_docx_tables": compare_docx_tables,
    "compare_line_spacing": compare_line_spacing,
    "compare_docx_lines": compare_docx_lines,
    "contains_page_break": contains_page_break,
    "has_page_numbers_in_footers": has_page_numbers_in_footers,
    "is_first_line_centered": is_first_line_centered,
}
"""Supported metrics by OSWorld name (``infeasible`` is the grader's own)."""
