"""Grading sits below the recorder and replay: it imports only the store's types (DESIGN §1)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import ownloop.grading

MODULES = sorted(Path(ownloop.grading.__file__).parent.glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_imports_only_the_store_and_itself(path: Path) -> None:
    tree = ast.parse(path.read_text())
    ours = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ownloop")
    }
    assert all(
        name.startswith(("ownloop.errors", "ownloop.scoring", "ownloop.store.", "ownloop.grading"))
        for name in ours
    ), ours


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_public_names_exist(path: Path) -> None:
    module = importlib.import_module(f"ownloop.grading.{path.stem}".removesuffix(".__init__"))
    assert module.__all__ and all(hasattr(module, name) for name in module.__all__)
