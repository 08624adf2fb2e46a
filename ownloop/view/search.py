"""The search page: steps whose recorded text contains what was typed, across the store.

It looks in thoughts, model responses, model, parse and operation errors, page URLs, the names of
the elements hit, and sessions' answers and errors (``ownloop.store.queries.search_steps``: a
case-insensitive ``contains`` over each, the words bound as a parameter). Each hit is shown as a
snippet around the first match, split in three plain strings so the template can mark the match
while escaping all of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ownloop.store import Store
from ownloop.store.queries import SEARCH_FILTERS, search_steps, session_choices
from ownloop.view.listing import Pager

__all__ = ["SEARCH_PAGE_SIZE", "Hit", "SearchView", "search"]

SEARCH_PAGE_SIZE = 50
_CONTEXT = 90  # characters either side of the match in a snippet


class Hit(NamedTuple):
    session_id: str
    step: int | None  # None: the session's end (its answer or error)
    field: str  # what matched: "thought, response"
    before: str
    match: str
    after: str
    run_id: str
    task_id: str
    agent: str
    status: str | None
    shot: str | None  # the step's screenshot sha256, for the thumbnail


class SearchView(NamedTuple):
    query: str
    filters: dict[str, str]
    hits: list[Hit]
    total: int
    page: int
    choices: dict[str, list[str]]

    @property
    def pager(self) -> Pager:
        return Pager(self.page, self.total, SEARCH_PAGE_SIZE)

    @property
    def params(self) -> dict[str, str]:
        return {"q": self.query, **self.filters}


def _snippet(text: str, query: str) -> tuple[str, str, str]:
    at = text.lower().find(query.lower())
    if at < 0:  # lower() changed the length (rare letters): show the start
        return "", "", text[: 2 * _CONTEXT]
    start, end = max(0, at - _CONTEXT), at + len(query)
    before = ("…" if start else "") + text[start:at]
    after = text[end : end + _CONTEXT] + ("…" if len(text) > end + _CONTEXT else "")
    return before, text[at:end], after


def search(store: Store, params: Mapping[str, str]) -> SearchView:
    """The search page for the query parameters: ``q`` (the text), ``run``, ``agent``,
    ``status`` and ``page``."""
    query = params.get("q", "").strip()
    filters = {
        name: params[name].strip() for name in SEARCH_FILTERS if params.get(name, "").strip()
    }
    text = params.get("page", "1")
    page = max(1, int(text)) if text.isdigit() and len(text) < 7 else 1
    if not query:
        return SearchView("", filters, [], 0, 1, _shown(session_choices(store)))
    result = search_steps(store, query, filters, SEARCH_PAGE_SIZE, (page - 1) * SEARCH_PAGE_SIZE)
    hits = []
    for session_id, step, field, found, run_id, task_id, agent, status, shot in result.rows:
        before, match, after = _snippet(str(found), query)
        fields = ", ".join(dict.fromkeys(str(field).split(",")))  # as ranked, each once
        hits.append(
            Hit(
                str(session_id),
                None if step is None else int(step),
                fields,
                before,
                match,
                after,
                str(run_id),
                str(task_id or ""),
                str(agent),
                status,
                shot,
            )
        )
    return SearchView(query, filters, hits, result.total, page, _shown(result.choices))


def _shown(choices: Mapping[str, list[str | None]]) -> dict[str, list[str]]:
    return {name: [v for v in choices[name] if v is not None] for name in SEARCH_FILTERS}
