"""The view package's shape: public names, what it imports, and where templates mark text safe."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import ownloop.view

PACKAGE = Path(ownloop.view.__file__).parent
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
# Our own literals and our own stylesheet; recorded text is never marked safe.
SAFE_ALLOWED = {
    "{{ css|safe }}",
    "{{ ' loading=\"lazy\"'|safe if not report }}",
    "{{ ' open'|safe if loop.last }}",
    "{{ ' class=\"latest\"'|safe if loop.last }}",
}


@pytest.mark.parametrize("name", MODULES)
def test_public_names_exist_and_imports_stay_in_bounds(name: str) -> None:
    module = importlib.import_module(f"ownloop.view.{name}")
    assert module.__all__ and all(hasattr(module, n) for n in module.__all__)
    tree = ast.parse((PACKAGE / f"{name}.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {
        a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names
    }
    ours = {m for m in imported if m and m.startswith("ownloop")}
    assert all(
        m.startswith(
            ("ownloop.errors", "ownloop.scoring", "ownloop.store", "ownloop.replay", "ownloop.view")
        )
        for m in ours
    )
    assert not any(m and m.split(".")[0] in {"playwright", "duckdb"} for m in imported)


def test_templates_mark_only_our_own_text_safe() -> None:
    found = set()
    for template in (PACKAGE / "templates").glob("*.html"):
        found |= set(re.findall(r"\{\{[^}]*\|\s*safe[^}]*\}\}", template.read_text()))
    assert found <= SAFE_ALLOWED, found - SAFE_ALLOWED


def test_no_inline_style_or_script_in_templates() -> None:
    # The viewer's CSP allows neither: everything lives in static/view.css and static/view.js.
    for template in (PACKAGE / "templates").glob("*.html"):
        text = template.read_text()
        assert not re.search(r"\sstyle=", text), template.name
        assert not re.search(r"\son[a-z]+=", text), template.name
        assert not re.search(r"<script>", text), template.name
