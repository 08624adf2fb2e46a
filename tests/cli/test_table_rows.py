"""A table shows at most ``--max-rows`` rows (default: what fits the terminal, 1,000 to a pipe) and
closes with a line saying how many were left out and how to get them; CSV and JSON print all.

The real ``ownloop`` in a subprocess on a real store (replay builders: journal, DuckDB index).
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from ownloop.store import open_store
from ownloop.store.query import QueryResult
from ownloop.testing.synthetic import Session, agent_step, click, write_sessions

RANGE = "select range as n, 'row ' || range as label from range({})"
HINT = "All of them: --max-rows 0, or --format csv|json"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("table-rows") / "store"
    write_sessions(
        open_store(root),
        *(
            Session(
                session_id=f"s{i:02d}",
                task_id=f"task-{i}",
                run_id="r1",
                answer="ok",
                start=float(i),
                steps=[agent_step(actions=[click()])],
            )
            for i in range(12)
        ),
    )
    return root


def ownloop(store: Path, *args: str, terminal_lines: int | None = None) -> list[str]:
    """Output lines of ``ownloop ARGS``: to a pipe, or (``terminal_lines``) to a terminal of that
    height as Rich sees one (FORCE_COLOR)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FORCE_COLOR", "NO_COLOR", "COLUMNS", "LINES", "OWNLOOP_STORE")
    }
    if terminal_lines is not None:
        env.update(FORCE_COLOR="1", COLUMNS="120", LINES=str(terminal_lines))
    done = subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(store), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout.splitlines()


def body(lines: list[str]) -> list[str]:
    """The table's row lines (between the header's rule and the bottom rule)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    end = next(i for i, line in enumerate(lines) if line.startswith("└"))
    return lines[start + 1 : end]


def test_a_piped_table_shows_1000_rows_and_says_how_to_get_the_rest(store: Path) -> None:
    lines = ownloop(store, "sql", RANGE.format(1500))
    rows = body(lines)
    assert len(rows) == 1000
    assert rows[0].split() == ["│", "0", "│", "row", "0", "│"]
    assert rows[-1].split() == ["│", "999", "│", "row", "999", "│"]
    assert lines[-1] == f"1,500 rows, the first 1,000 shown; 500 not shown. {HINT}"


def test_max_rows_sets_how_many_and_0_shows_all(store: Path) -> None:
    three = ownloop(store, "sql", RANGE.format(10), "--max-rows", "3")
    assert [row.split()[1] for row in body(three)] == ["0", "1", "2"]
    assert three[-1] == f"10 rows, the first 3 shown; 7 not shown. {HINT}"
    every = ownloop(store, "sql", RANGE.format(1500), "--max-rows", "0")
    assert len(body(every)) == 1500 and every[-1] == "1,500 rows"


def test_a_table_that_fits_says_only_how_many_rows(store: Path) -> None:
    lines = ownloop(store, "sql", RANGE.format(3), "--max-rows", "3")
    assert len(body(lines)) == 3 and lines[-1] == "3 rows"


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_csv_and_json_print_every_row_whatever_max_rows_says(store: Path, fmt: str) -> None:
    lines = ownloop(store, "sql", RANGE.format(1500), "--format", fmt, "--max-rows", "2")
    if fmt == "csv":
        assert len(list(csv.reader(io.StringIO("\n".join(lines))))) == 1501
    else:
        assert len(lines) == 1502 and lines[0] == "[" and lines[-1] == "]"


def test_a_terminal_table_fits_the_terminal_height(store: Path) -> None:
    lines = ownloop(store, "sql", RANGE.format(100), terminal_lines=20)
    rows = body(lines)
    assert len(rows) == 13  # 20 lines less the rules, the header, the caption and the prompt
    assert len(lines) <= 20
    assert "100 rows, the first 13 shown; 87 not shown. " + HINT in lines[-1]


def test_sessions_takes_max_rows_too(store: Path) -> None:
    lines = ownloop(store, "sessions", "--max-rows", "4")
    assert [row.split()[3] for row in body(lines)] == ["s11", "s10", "s09", "s08"]
    assert lines[-1] == f"12 rows, the first 4 shown; 8 not shown. {HINT}"


def test_a_wide_cell_keeps_the_columns_aligned(store: Path) -> None:
    lines = ownloop(store, "sql", "select 'é漢字' as word, E'two\\nlines' as text, 1 as n")
    assert lines[:6] == [
        "┏━━━━━━━┳━━━━━━━┳━━━┓",
        "┃ word  ┃ text  ┃ n ┃",
        "┡━━━━━━━╇━━━━━━━╇━━━┩",
        "│ é漢字 │ two   │ 1 │",
        "│       │ lines │   │",
        "└───────┴───────┴───┘",
    ]


def test_the_piped_table_is_drawn_as_rich_draws_it() -> None:
    result = QueryResult(
        ["word", "text", "n"],
        ["VARCHAR", "VARCHAR", "INTEGER"],
        [("é漢字", "two\nlines", 1), (None, "[/x] \x1b[31m", 2), ("a" * 30, "", None)],
    )
    console = Console(
        file=io.StringIO(), width=100_000, soft_wrap=True, markup=False, highlight=False
    )
    console.print(result.to_rich())
    assert list(result.to_text()) == console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def test_a_table_prints_floats_without_binary_noise_and_csv_keeps_every_digit(store: Path) -> None:
    query = "select 7.3725000000000005::double as seconds, 1/3 as third, 2.5::double as half"
    table = "\n".join(ownloop(store, "sql", query))
    assert "7.3725 " in table and "0.3333333333 " in table and "2.5 " in table
    assert "7.3725000000000005" not in table
    rows = list(csv.reader(io.StringIO("\n".join(ownloop(store, "sql", query, "--format", "csv")))))
    assert rows[1][0] == "7.3725000000000005"


def test_sessions_of_an_unknown_run_is_one_line_naming_the_runs_there(store: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(store), "sessions", "--run", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        f"Error: no run 'nope' in {store}; its runs: 'r1'. List them with: ownloop --store "
        f'{store} sql "select * from runs"\n'
    )
