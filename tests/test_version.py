"""One version: ``ownloop/version.py`` holds it, the package face and pyproject.toml agree with
it, and no module reads it from the package face (which would point an arrow up the house)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import ownloop
from ownloop.version import __version__

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_one_value() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert __version__ == ownloop.__version__ == project["version"]


def test_no_module_reads_the_version_from_the_package_face() -> None:
    upward = []
    for path in sorted((ROOT / "ownloop").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "ownloop" and node.level == 0:
                if any(alias.name == "__version__" for alias in node.names):
                    upward.append(str(path.relative_to(ROOT)))
    assert upward == []
