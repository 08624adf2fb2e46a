"""The suite's order figures (``tests/ordering.py``): read from a JUnit report, merged by module."""

from __future__ import annotations

from pathlib import Path

from tests.ordering import from_junit, merged

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.x.test_y" name="test_a" time="1.5"/>
<testcase classname="tests.x.test_y.TestZ" name="test_b" time="2.0"/>
<testcase classname="tests.test_w" name="test_c" time="0.5"/>
</testsuite></testsuites>"""


def test_a_report_counts_each_module_and_a_merge_replaces_only_the_measured(tmp_path: Path) -> None:
    report = tmp_path / "part.xml"
    report.write_text(REPORT)
    figures = from_junit(report)
    assert figures == {"tests/x/test_y.py": 3.5, "tests/test_w.py": 0.5}
    old = {"tests/x/test_y.py": 90.0, "tests/long.py": 10.0, "tests/test_w.py": 1.0}
    assert list(merged(old, figures).items()) == [
        ("tests/long.py", 10.0),
        ("tests/x/test_y.py", 3.5),
        ("tests/test_w.py", 0.5),
    ]
