"""The folders are the architecture: which package may import which (STYLE §1, DESIGN §1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ownloop"

# What each part may import of ours, besides itself. Imports inside functions count too.
ALLOWED = {
    "store": set(),
    "agents": {"store"},
    "grading": {"store"},
    "recorder": {"store", "agents", "grading"},
    "modelserver": {"store", "agents", "recorder"},
    "replay": {"store", "agents", "grading", "recorder", "modelserver"},
    "transfer": {"store", "agents", "grading", "replay"},
    "view": {"store", "replay"},
}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_each_part_imports_only_what_it_may(part: str) -> None:
    wrong = []
    for path in sorted((PACKAGE / part).rglob("*.py")):
        for name in _imports(path):
            head, _, rest = name.partition(".")
            if head != "ownloop":
                continue
            other = rest.partition(".")[0]
            if other in ("cli", "demo") or (other not in (part, "") and other not in ALLOWED[part]
                                            and other != "__init__"):
                wrong.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert wrong == []


def test_only_browser_py_imports_playwright_and_only_the_store_imports_duckdb() -> None:
    playwright, duckdb = [], []
    for path in _modules():
        roots = {name.partition(".")[0] for name in _imports(path)}
        where = str(path.relative_to(PACKAGE))
        if "playwright" in roots and where != "recorder/browser.py":
            playwright.append(where)
        if "duckdb" in roots and not where.startswith("store/"):
            duckdb.append(where)
    assert (playwright, duckdb) == ([], [])


def test_nothing_imports_the_cli() -> None:
    assert [str(p.relative_to(PACKAGE)) for p in _modules()
            if p.name != "cli.py" and "ownloop.cli" in _imports(p)
            and p.name != "__main__.py"] == []


def test_model_text_never_reaches_eval_or_exec() -> None:
    """No module of ours calls eval, exec or compile (model text is data)."""
    calls = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("eval", "exec", "compile")):
                calls.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.func.id}")
    assert calls == []
