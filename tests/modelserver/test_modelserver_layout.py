"""The model server's place: it may use the store, the agents, the world's browser and suites
(it stands beside the recorder, not above it) and the quiet HTTP server (``httpserver.py``),
never the CLI, and never imports Playwright itself (only world/browser.py and world/chromium.py
do)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import ownloop.modelserver

MODULES = sorted(Path(ownloop.modelserver.__file__).parent.glob("*.py"))
ALLOWED = (
    "ownloop.errors",
    "ownloop.httpserver",
    "ownloop.scoring",
    "ownloop.store.",
    "ownloop.agents",
    "ownloop.world.",
    "ownloop.modelserver",
)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_imports_stay_inside_the_allowed_parts(path: Path) -> None:
    imports = _imports(path)
    ours = {name for name in imports if name.startswith("ownloop")}
    assert all(name.startswith(ALLOWED) for name in ours), ours
    assert not any(name.split(".")[0] in {"playwright", "duckdb"} for name in imports)


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_public_names_exist(path: Path) -> None:
    module = importlib.import_module(f"ownloop.modelserver.{path.stem}".removesuffix(".__init__"))
    assert module.__all__ and all(hasattr(module, name) for name in module.__all__)
