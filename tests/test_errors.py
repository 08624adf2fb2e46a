"""The tree drawn in ``ownloop/errors.py``'s docstring is the family as the code has it."""

from __future__ import annotations

import importlib
import pkgutil
import re

import ownloop
from ownloop import errors
from ownloop.errors import OwnloopError

_LINE = re.compile(r"^( *)\* (\w+)(?: - \w+: .+)?$")


def _drawn() -> dict[str, str | None]:
    """Each class the docstring draws, with the class it is drawn under (None at the root)."""
    assert errors.__doc__ is not None
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in errors.__doc__.splitlines():
        found = _LINE.match(line)
        if found is None:
            continue
        depth, name = len(found.group(1)), found.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        assert name not in parents, f"{name} is drawn twice"
        parents[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return parents


def _family() -> dict[str, str | None]:
    """Every subclass of OwnloopError the package defines, with its nearest base in the family."""
    for module in pkgutil.walk_packages(ownloop.__path__, "ownloop."):
        if not module.name.endswith("__main__"):  # running it would run the CLI
            importlib.import_module(module.name)
    parents: dict[str, str | None] = {"OwnloopError": None}
    todo = [OwnloopError]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if not sub.__module__.startswith("ownloop."):
                continue  # a test's own subclass is not the package's
            assert sub.__name__ not in parents, f"two classes named {sub.__name__}"
            parents[sub.__name__] = next(
                b.__name__ for b in sub.__mro__[1:] if issubclass(b, OwnloopError)
            )
            todo.append(sub)
    return parents


def test_the_docstring_draws_every_error_under_its_base() -> None:
    drawn, family = _drawn(), _family()
    assert len(family) > 30  # the walk found the package's errors, not just the root
    assert sorted(set(family) - set(drawn)) == [], "add these to ownloop/errors.py's tree"
    assert sorted(set(drawn) - set(family)) == [], "these are drawn but not defined"
    assert drawn == family
