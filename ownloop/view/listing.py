"""The runs and sessions tables of the viewer: filters and sorting from query parameters.

Query parameters are user text. Filter values only ever reach SQL as bound parameters (see
``ownloop.store.queries``), and a sort column only by its name in a fixed list (an unknown one
falls back to the default), so no parameter can change a query's shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ownloop.store import Store
from ownloop.store.queries import (
    RUN_COLUMNS,
    SESSION_COLUMNS,
    Page,
    run_listing,
    session_listing,
)

__all__ = [
    "PAGE_SIZE",
    "RUN_COLUMNS",
    "SESSION_COLUMNS",
    "Listing",
    "Pager",
    "counts_text",
    "list_runs",
    "list_sessions",
    "page_links",
]

PAGE_SIZE = 200
_SESSION_FILTERS = ("run", "agent", "model", "status", "passed", "task")
_RUN_FILTERS = ("agent", "model")


class Pager(NamedTuple):
    """Page ``page`` of ``total`` rows shown ``size`` a page: what the pager below a table says
    and links to."""

    page: int
    total: int
    size: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))

    @property
    def links(self) -> list[int | None]:
        return page_links(self.page, self.pages)


class Listing(NamedTuple):
    """A table to show: its columns, rows, the filters and sort in force, and filter choices."""

    columns: list[str]
    rows: list[dict[str, Any]]
    filters: dict[str, str]
    sort: str
    descending: bool
    choices: dict[str, list[str]]
    page: int
    more: bool
    total: int = 0  # rows over every page

    @property
    def pager(self) -> Pager:
        return Pager(self.page, self.total, PAGE_SIZE)


def page_links(page: int, pages: int) -> list[int | None]:
    """The page numbers a pager links to: the first, the last and two either side of ``page``,
    None where numbers are left out (e.g. ``[1, None, 4, 5, 6, 7, 8, None, 20]``)."""
    shown = sorted({1, pages} | set(range(max(1, page - 2), min(pages, page + 2) + 1)))
    links: list[int | None] = []
    for number in shown:
        if links and number - (links[-1] or 0) > 1:
            links.append(None)
        links.append(number)
    return links


def _filters(params: Mapping[str, str], names: Sequence[str]) -> dict[str, str]:
    return {name: params[name].strip() for name in names if params.get(name, "").strip()}


def _order(params: Mapping[str, str], columns: Sequence[str], default: str) -> tuple[str, bool]:
    sort = params.get("sort", default)
    if sort not in columns:
        sort = default
    return sort, params.get("dir", "desc" if sort == default else "asc") != "asc"


def _page(params: Mapping[str, str]) -> int:
    text = params.get("page", "1")
    return max(1, int(text)) if text.isdigit() and len(text) < 7 else 1


def _values(filters: Mapping[str, str]) -> dict[str, str | None]:
    """The filters as the store's queries take them: ``(none)`` is no value."""
    return {
        name: None if value == "(none)" and name != "task" else value
        for name, value in filters.items()
    }


def _shown(choices: dict[str, list[str | None]]) -> dict[str, list[str]]:
    return {
        name: ["(none)" if v is None else v for v in values] for name, values in choices.items()
    }


def list_sessions(store: Store, params: Mapping[str, str]) -> Listing:
    """The sessions table for the query parameters ``params``.

    Filters: ``run``, ``agent``, ``model``, ``status`` (exact; ``(none)`` for a session with no
    end yet), ``passed`` (yes, no or ungraded), ``task`` (part of the task id, any case).
    Sorting: ``sort`` (a name of ``SESSION_COLUMNS``) and ``dir`` (asc or desc); ``page`` from 1.
    """
    listing = _listing(store, params, SESSION_COLUMNS, _SESSION_FILTERS, session_listing)
    listing.choices["passed"] = ["yes", "no", "ungraded"]
    return listing


def _listing(
    store: Store,
    params: Mapping[str, str],
    columns: Sequence[str],
    filter_names: Sequence[str],
    query: Callable[..., Any],
    record: Callable[[dict[str, Any]], dict[str, Any]] = lambda row: row,
) -> Listing:
    """One page of ``query``'s rows (each made a dict, then ``record``'s) for ``params``."""
    filters = _filters(params, filter_names)
    sort, descending = _order(params, columns, "started_at")
    page = _page(params)
    listed = query(
        store, _values(filters), Page(sort, descending, PAGE_SIZE + 1, (page - 1) * PAGE_SIZE)
    )
    result = listed.page
    rows = [record(dict(zip(result.columns, row, strict=True))) for row in result.rows]
    return Listing(
        list(columns),
        rows[:PAGE_SIZE],
        filters,
        sort,
        descending,
        _shown(listed.choices),
        page,
        len(rows) > PAGE_SIZE,
        listed.total,
    )


def counts_text(counts: Any) -> str:
    """A JSON object of counts as text: ``2 finished, 1 timeout``."""
    if not counts:
        return ""
    data = json.loads(counts) if isinstance(counts, str) else counts
    if not isinstance(data, dict):
        return str(data)
    return ", ".join(f"{count} {status}" for status, count in sorted(data.items()))


def list_runs(store: Store, params: Mapping[str, str]) -> Listing:
    """The runs table for the query parameters ``params``: filters ``agent`` and ``model``;
    ``sort`` (a name of ``RUN_COLUMNS``), ``dir`` and ``page`` as for sessions."""
    return _listing(store, params, RUN_COLUMNS, _RUN_FILTERS, run_listing, _run_record)


def _run_record(record: dict[str, Any]) -> dict[str, Any]:
    record["counts"] = counts_text(record["counts"])
    record["statuses"] = counts_text(record["statuses"])
    return record
