"""The folders are the architecture: which package may import which (STYLE §1, DESIGN §1)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ownloop"

# What each part may import of ours, besides itself. Imports inside functions count too.
ALLOWED = {
    "scoring": set(),
    "store": {"scoring"},
    "agents": {"scoring", "store"},
    "grading": {"scoring", "store"},
    "world": {"scoring", "store", "agents", "grading"},
    "recorder": {"scoring", "store", "agents", "grading", "world"},
    "modelserver": {"scoring", "store", "agents", "world"},
    "desktopserver": {"scoring", "store", "agents"},
    "replay": {"scoring", "store", "agents", "grading", "recorder", "modelserver", "world"},
    "transfer": {"scoring", "store", "agents", "grading", "replay"},
    "view": {"scoring", "store", "replay"},
    "testing": {"scoring", "store", "agents"},
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
            if other in ("cli", "demo") or (
                other not in (part, "version", "errors", "httpserver")  # below everything
                and other not in ALLOWED[part]
            ):
                wrong.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert wrong == []


@pytest.mark.slow
def test_only_the_browser_imports_playwright_and_only_the_store_imports_duckdb() -> None:
    playwright, duckdb = [], []
    for path in _modules():
        roots = {name.partition(".")[0] for name in _imports(path)}
        where = str(path.relative_to(PACKAGE))
        if "playwright" in roots and where not in (
            "world/browser.py",
            "world/chromium.py",
            "world/network.py",
        ):
            playwright.append(where)
        if "duckdb" in roots and not where.startswith("store/"):
            duckdb.append(where)
    assert (playwright, duckdb) == ([], [])


@pytest.mark.slow
def test_only_the_ray_executor_imports_ray() -> None:
    """Ray is an optional extra, and both executors share one recorder loop (DESIGN §9)."""
    assert [
        str(p.relative_to(PACKAGE))
        for p in _modules()
        if "ray" in {name.partition(".")[0] for name in _imports(p)}
        and p.relative_to(PACKAGE).as_posix() != "recorder/ray_executor.py"
    ] == []


def test_only_the_cli_and_the_demo_import_the_package_face() -> None:
    """``ownloop`` itself (``__init__.py``) stands above every part: a part that imported it
    (for ``__version__``, say) would be an upward arrow; the version has a module of its own."""
    face = {"__init__.py", "__main__.py", "cli.py", "demo.py"}
    assert [
        f"{p.relative_to(PACKAGE)} imports {name}"
        for p in _modules()
        if p.relative_to(PACKAGE).as_posix() not in face
        for name in sorted(_imports(p))
        if name in ("ownloop", "ownloop.__init__")
    ] == []
    assert _imports(PACKAGE / "version.py") == set()
    assert _imports(PACKAGE / "errors.py") == set()
    assert {n for n in _imports(PACKAGE / "httpserver.py") if n.startswith("ownloop")} == set()


def test_nothing_imports_the_cli() -> None:
    """The ``cli`` package's modules import each other; no other module imports any of them."""
    assert [
        str(p.relative_to(PACKAGE))
        for p in _modules()
        if p.relative_to(PACKAGE).parts[0] != "cli"
        and p.name != "__main__.py"
        and any(name == "ownloop.cli" or name.startswith("ownloop.cli.") for name in _imports(p))
    ] == []


@pytest.mark.slow
def test_model_text_never_reaches_eval_or_exec() -> None:
    """No module of ours calls eval, exec or compile (model text is data)."""
    calls = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("eval", "exec", "compile")
            ):
                calls.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.func.id}")
    assert calls == []


# SQL text: only ownloop/store writes it (issue 10, hole 12). Elsewhere a query is a string
# literal or a module constant, and values travel as bound parameters.
_QUERY_METHODS = {"sql", "sql_arrow", "query", "query_arrow"}
_SQL = re.compile(
    r"\b(select|with)\b.+\bfrom\b|\bwhere\b\s+[\w.()]+\s*(=|<|>|!=|\bin\b|\bis\b|\blike\b)"
    r"|\border\s+by\b|\bgroup\s+by\b|\bunion\b|\blimit\s+\d",
    re.IGNORECASE | re.DOTALL,
)


def _sql_pasting(tree: ast.Module) -> list[tuple[int, str]]:
    """Where a module pastes text into SQL or hands a query method anything but a constant."""
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }

    def text(node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        return constants.get(node.id) if isinstance(node, ast.Name) else None

    def operands(node: ast.expr) -> list[ast.expr]:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return operands(node.left) + operands(node.right)
        return [node]

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _QUERY_METHODS:
                first = node.args[:1] or [k.value for k in node.keywords if k.arg == "query"]
                if first and text(first[0]) is None:
                    found.append((node.lineno, f".{node.func.attr}() of a non-constant"))
            if node.func.attr == "format" and _SQL.search(text(node.func.value) or ""):
                found.append((node.lineno, "SQL made with .format"))
        elif isinstance(node, ast.JoinedStr):
            # The text before the last {value}: SQL there means a value is pasted into SQL.
            last = max(
                (i for i, part in enumerate(node.values) if isinstance(part, ast.FormattedValue)),
                default=-1,
            )
            before = "".join(
                p.value
                for p in node.values[:last]
                if isinstance(p, ast.Constant) and isinstance(p.value, str)
            )
            if _SQL.search(before):
                found.append((node.lineno, "SQL made with an f-string"))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            if _SQL.search(text(node.left) or ""):
                found.append((node.lineno, "SQL made with %"))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            parts = [text(part) for part in operands(node)]
            if None in parts and any(_SQL.search(part or "") for part in parts):
                found.append((node.lineno, "SQL made with +"))
    return found


@pytest.mark.slow
def test_only_the_store_writes_sql_text() -> None:
    """Outside ownloop/store no module quotes values into SQL or builds SQL text: it calls the
    named queries of ``ownloop.store.queries`` (or passes a constant query and parameters)."""
    wrong = []
    for path in _modules():
        where = str(path.relative_to(PACKAGE))
        if where.startswith("store/"):
            continue
        source = path.read_text()
        if "sql_literal" in source:
            wrong.append(f"{where}: sql_literal")
        wrong += [f"{where}:{line} {what}" for line, what in _sql_pasting(ast.parse(source))]
    assert wrong == []


@pytest.mark.parametrize(
    "source",
    [
        "store.sql(f\"select * from sessions where run_id = '{run}'\")",
        "rows = store.sql_arrow(query)",
        "q = 'select a from t where run_id = ' + quoted",
        "q = \"select a from t where x = '%s'\" % value",
        "Q = \"select a from sessions where run_id = '{run}'\"\nq = Q.format(run=run)",
        'clause = f"where run_id = {value}"',
    ],
)
def test_the_sql_tripwire_catches_pasting(source: str) -> None:
    assert _sql_pasting(ast.parse(source))


@pytest.mark.parametrize(
    "source",
    [
        "Q = 'select * from sessions where run_id = $run'\nstore.sql(Q, {'run': run})",
        "store.sql('select 1', [x])",
        "raise E(f'no events for {wanted}. List them: ownloop sql \"select * from sessions\"')",
        "where = f'{name}: task #{number}'",
        "echo(f'say where to write: {path}')",
    ],
)
def test_the_sql_tripwire_lets_constants_and_prose_pass(source: str) -> None:
    assert _sql_pasting(ast.parse(source)) == []


def _module_file(name: str) -> Path | None:
    """The file of module ``ownloop.x.y`` (a package's ``__init__.py`` counts as no file)."""
    parts = name.split(".")[1:]
    path = PACKAGE.joinpath(*parts)
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _runtime_imports(path: Path) -> set[str]:
    """The modules ``path`` imports when it runs (imports inside functions too; those only a
    type checker reads, under ``if TYPE_CHECKING:``, left out)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    checking = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_two_modules_import_each_other_in_a_loop() -> None:
    """The import graph between files has no circle (a package's face, its ``__init__.py``,
    only hands names on and is not a file here)."""
    graph = {
        path: {
            found
            for name in _runtime_imports(path)
            if name.startswith("ownloop.") and (found := _module_file(name)) not in (None, path)
        }
        for path in _modules()
        if path.name != "__init__.py"
    }
    circles = []
    state: dict[Path, int] = {}  # 1: on the current path, 2: done

    def visit(path: Path, trail: list[Path]) -> None:
        state[path] = 1
        for other in sorted(graph.get(path, ())):
            if state.get(other) == 1:
                loop = trail[trail.index(other) :] + [other]
                circles.append(" -> ".join(str(p.relative_to(PACKAGE)) for p in loop))
            elif other not in state:
                visit(other, [*trail, other])
        state[path] = 2

    for path in sorted(graph):
        if path not in state:
            visit(path, [path])
    assert circles == []
