"""Prompt texts read at run time from the user's clones of a model's released code.

OpenCUA's, Fara-7B's and MolmoWeb's prompts live in their released repositories, not on PyPI, and
their prose is not copied into ownloop. As the user's own runner does with ``--path``, the caller
(``record``, ``replay --execute``, ``ownloop agents``) looks for the released module under
``--released PATH`` (a colon list; the CLI's default is ``$OWNLOOP_PATH``) with ``load_released``
and hands the texts to the agent, which reads no file itself. The file is *read*, never imported
or run: top-level assignments of string literals (implicit concatenation and ``+`` of literals
included, and the literal inside ``Template("...")``) are taken with ``ast.literal_eval``, so a
clone needs none of its own dependencies installed. Without the module the agent uses its
built-in prompt, and ``prompt_source`` says which was used.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "Released",
    "ReleasedSpec",
    "checkout_commit",
    "find_released",
    "load_released",
    "read_facts",
    "read_module",
    "released_commit",
    "released_sha256",
    "search_roots",
]

# Callables whose single string-literal argument is taken as the constant's text (the template
# source); the call itself is never made.
_TEMPLATE_CALLS = frozenset({"Template"})


class Released(NamedTuple):
    constants: dict[str, str]
    source: str  # "released:/abs/path/to/module.py"
    sha256: tuple[tuple[str, str], ...] = ()  # (absolute path, sha256 of its bytes) per file read
    commit: str = ""  # HEAD of the git checkout holding the files ("" when not one)


def released_commit(agent: object) -> str:
    """The commit of the clone ``agent``'s released texts came from ("" when none)."""
    released = getattr(agent, "released", None)
    return released.commit if isinstance(released, Released) else ""


def released_sha256(agent: object) -> dict[str, str]:
    """Each file ``agent``'s released texts were read from, with its sha256 (empty: none)."""
    released = getattr(agent, "released", None)
    return dict(released.sha256) if isinstance(released, Released) else {}


def read_facts(path: Path) -> tuple[tuple[tuple[str, str], ...], str]:
    """((path, sha256 of its bytes),) and the commit of the git checkout holding ``path``, for
    ``RunStarted`` to say exactly which text was read."""
    resolved = path.resolve()
    try:
        digest = hashlib.sha256(resolved.read_bytes()).hexdigest()
    except OSError:
        digest = ""
    return ((str(resolved), digest),), checkout_commit(resolved)


_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def checkout_commit(path: Path) -> str:
    """The commit HEAD names in the git checkout holding ``path`` ("" when there is none or it
    cannot be read). The repository's files are read, git is never run."""
    for folder in (path if path.is_dir() else path.parent, *path.parents):
        dot = folder / ".git"
        if dot.is_file():  # a worktree or submodule: "gitdir: PATH"
            try:
                text = dot.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                return ""
            if not text.startswith("gitdir:"):
                return ""
            dot = (folder / text.removeprefix("gitdir:").strip()).resolve()
        if dot.is_dir():
            return _head(dot)
    return ""


def _head(git: Path) -> str:
    try:
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    if _SHA.fullmatch(head):
        return head
    ref = head.removeprefix("ref:").strip()
    if not ref.startswith("refs/"):
        return ""
    common = git
    commondir = git / "commondir"
    if commondir.is_file():
        try:
            common = (git / commondir.read_text(encoding="utf-8").strip()).resolve()
        except (OSError, UnicodeDecodeError):
            return ""
    for base in (git, common):
        try:
            value = (base / ref).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if _SHA.fullmatch(value):
            return value
    try:
        packed = (common / "packed-refs").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name.strip() == ref and _SHA.fullmatch(sha):
            return sha
    return ""


class ReleasedSpec(NamedTuple):
    """Where an agent's prompt texts live in a clone of its model's released code."""

    repository: str  # e.g. "microsoft/fara", for messages
    candidates: tuple[str, ...] = ()  # module paths relative to a clone's root
    names: tuple[str, ...] = ()  # string constants the module must define
    loader: Callable[[str], Released | None] | None = None
    """For texts spread over several files: reads them under a colon list of roots (instead of
    ``candidates``/``names``)."""


def load_released(spec: ReleasedSpec, roots: str) -> Released | None:
    """Every string constant of the first module under ``roots`` (a colon list of folders, as
    ``--released`` gives them) that defines all of ``spec.names``; None when there is none.

    The caller resolves ``--released``/``$OWNLOOP_PATH`` and hands the texts to the agent: the
    agent itself reads no file and no environment variable.
    """
    if spec.loader is not None:
        return spec.loader(roots)
    for root in search_roots(roots):
        for candidate in spec.candidates:
            for path in (root / candidate, root / Path(candidate).name):
                if not path.is_file():
                    continue
                constants = _string_constants(path)
                if all(name in constants for name in spec.names):
                    digests, commit = read_facts(path)
                    return Released(constants, f"released:{path.resolve()}", digests, commit)
    return None


def search_roots(released: str | None) -> list[Path]:
    """The folders of ``released``, a colon list (``--released``; the CLI reads
    ``$OWNLOOP_PATH`` into it): none when it is None or empty."""
    text = released or ""
    return [Path(part).expanduser() for part in text.split(os.pathsep) if part.strip()]


def read_module(path: Path) -> ast.Module | None:
    """The module at ``path`` parsed, never run; None when it cannot be read or parsed."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None


def _string_constants(path: Path) -> dict[str, str]:
    tree = read_module(path)
    if tree is None:
        return {}
    found: dict[str, str] = {}
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if value is None:
            continue
        text = _literal_text(value)
        if text is None:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                found[target.id] = text
    return found


def _literal_text(node: ast.expr) -> str | None:
    """A string literal, ``+`` of string literals, or a template made from one
    (``Template("...")``, as MolmoWeb's Jinja prompt); anything else is not taken."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal_text(node.left), _literal_text(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Call) and _is_template_call(node):
        return _literal_text(node.args[0])
    if isinstance(node, ast.Call) and _is_strip_call(node):
        # '"...".strip()' (OSWorld's OpenCUA prompts): str.strip is applied here, not called.
        text = _literal_text(node.func.value)  # type: ignore[attr-defined]
        return None if text is None else text.strip()
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def _is_template_call(node: ast.Call) -> bool:
    """``Template(<literal>)`` or ``jinja2.Template(<literal>)``: one argument, no keywords."""
    if len(node.args) != 1 or node.keywords:
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name in _TEMPLATE_CALLS


def _is_strip_call(node: ast.Call) -> bool:
    """``<literal>.strip()`` with no arguments."""
    return (
        isinstance(node.func, ast.Attribute)
        and node.func.attr == "strip"
        and not node.args
        and not node.keywords
    )


def find_released(
    candidates: Sequence[str], names: Sequence[str], released: str | None = None
) -> Released | None:
    """The first candidate module under the search roots that defines every constant in ``names``.

    Args:
        candidates: module paths relative to a clone's root, e.g. ``"src/fara/_prompts.py"``; a
            root may also be the module's own folder, so the file name alone is tried too.
        names: the string constants the agent needs.
        released: the ``--released`` value, a colon list of folders (None: none).
    """
    for root in search_roots(released):
        for candidate in candidates:
            for path in (root / candidate, root / Path(candidate).name):
                if not path.is_file():
                    continue
                constants = _string_constants(path)
                if all(name in constants for name in names):
                    digests, commit = read_facts(path)
                    return Released(
                        {n: constants[n] for n in names},
                        f"released:{path.resolve()}",
                        digests,
                        commit,
                    )
    return None
