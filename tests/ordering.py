"""The order the suite's modules run in: longest first, from measured figures.

xdist's ``--dist loadfile`` hands whole modules to its workers in collection order; a long module
handed out last keeps one worker busy alone at the end. So ``tests/conftest.py`` sorts the
collected modules by their measured seconds (``tests/durations.json``), longest first; a module
not measured yet counts as ``UNMEASURED_S``.

Refresh the figures from a full run's JUnit report::

    .venv/bin/python -m pytest --junitxml=/tmp/suite.xml
    .venv/bin/python tests/ordering.py /tmp/suite.xml

or only the modules a partial run measured (the others keep their figures), after changing them::

    .venv/bin/python -m pytest -n 2 --junitxml=/tmp/part.xml tests/x/test_y.py ...
    .venv/bin/python tests/ordering.py --merge /tmp/part.xml
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

FIGURES = Path(__file__).with_name("durations.json")
UNMEASURED_S = 20.0  # a new module: long enough to start early, not ahead of the known long ones


def measured() -> dict[str, float]:
    """Each module's seconds (``tests/x/test_y.py`` -> setup + call + teardown of its tests)."""
    if not FIGURES.exists():
        return {}
    return {str(k): float(v) for k, v in json.loads(FIGURES.read_text()).items()}


def module_of(classname: str) -> str:
    """A JUnit ``classname`` (``tests.x.test_y`` or ``tests.x.test_y.TestZ``) as its file."""
    parts: list[str] = []
    for part in classname.split("."):
        parts.append(part)
        if part.startswith("test_"):
            break
    return "/".join(parts) + ".py"


def from_junit(report: Path) -> dict[str, float]:
    seconds: Counter[str] = Counter()
    for case in ET.parse(report).iter("testcase"):
        seconds[module_of(case.get("classname", ""))] += float(case.get("time") or 0)
    return {name: round(value, 1) for name, value in seconds.most_common()}


def merged(old: dict[str, float], new: dict[str, float]) -> dict[str, float]:
    """``old``'s figures with ``new``'s in place of those it measured, longest first."""
    both = {**old, **new}
    return dict(sorted(both.items(), key=lambda item: -item[1]))


def main(argv: list[str]) -> int:
    merge = argv[:1] == ["--merge"]
    if merge:
        argv = argv[1:]
    if len(argv) != 1:
        print(
            "usage: python tests/ordering.py [--merge] JUNIT.xml (a full run's --junitxml report;"
            " --merge: a partial run's, its modules' figures replaced)"
        )
        return 2
    figures = from_junit(Path(argv[0]))
    if merge:
        print(f"{len(figures)} modules measured: {', '.join(sorted(figures))}")
        figures = merged(measured(), figures)
    FIGURES.write_text(json.dumps(figures, indent=0) + "\n")
    print(f"{FIGURES}: {len(figures)} modules, {sum(figures.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
