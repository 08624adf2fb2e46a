"""The viewer's search across the store: steps and session ends whose recorded text contains
what was typed, a page at a time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ownloop.store.queries.listing import SESSION_CHOICES, session_choices_of

if TYPE_CHECKING:
    from ownloop.store import Store

__all__ = ["SEARCH_FILTERS", "SearchPage", "search_steps"]

# What search looks in: (what it is, table, the step column or null, the text column).
_SEARCHED = (
    ("thought", "action_parsed", "step", "thought"),
    ("response", "model_called", "step", "response"),
    ("model error", "model_called", "step", "error"),
    ("parse error", "action_parsed", "step", "error"),
    ("operation error", "browser_acted", "step", "error"),
    ("url", "screenshot_taken", "step", "url"),
    ("url", "browser_acted", "step", "url_after"),
    ("element", "browser_acted", "step", "element ->> 'name'"),
    ("answer", "session_ended", "null", "answer"),
    ("session error", "session_ended", "null", "error"),
)
SEARCH_FILTERS = ("run", "agent", "status")
"""The filters ``search_steps`` takes besides the text."""


class SearchPage(NamedTuple):
    """One page of search hits (``session_id, step, fields, text, run_id, task_id, agent,
    status, screenshot_sha256`` each), how many hits there are in all, and the values of the
    filters (as ``session_choices``)."""

    rows: list[tuple[Any, ...]]
    total: int
    choices: dict[str, list[str | None]]


def search_steps(
    store: Store, text: str, filters: Mapping[str, str], limit: int, offset: int
) -> SearchPage:
    """Steps (and session ends, step None) whose thought, response, errors, URL, element name
    or answer contain ``text`` (any case), newest session first; ``filters``: ``run``,
    ``agent``, ``status`` (equal)."""
    # One hit per step (per session end for answers and errors): its fields that matched, and
    # the text of the first of them in the order of _SEARCHED.
    hits = " union all ".join(
        f"select session_id, {step} as step, '{field}' as field, {rank} as rank, "
        f"{column} as text from {table} where contains(lower({column}), $q)"
        for rank, (field, table, step, column) in enumerate(_SEARCHED)
    )
    grouped = (
        f"select session_id, step, string_agg(field, ',' order by rank) as fields, "
        f"arg_min(text, rank) as text from ({hits}) group by session_id, step"
    )
    params: dict[str, Any] = {"q": text.lower()}
    where = ["true"]
    for name, column in (("run", "s.run_id"), ("agent", "s.agent"), ("status", "s.status")):
        if filters.get(name):
            where.append(f"{column} = ${name}")
            params[name] = filters[name]
    # The hit sessions' facts as the sessions view gives them (session_facts: the first
    # SessionStarted, the last SessionEnded), read for those sessions only: the whole view costs
    # more than search. The thumbnail is looked up for the page's hits only.
    order = "order by started_at desc, session_id, step nulls last"
    found, choices = store.sql_many(
        [
            (
                f"with h as ({grouped}), "
                "r as (select run_id, arg_min(agent, time) as agent from run_started group by "
                "run_id), "
                "s as (select f.session_id, f.run_id, f.task_id, "
                "coalesce(nullif(f.agent, ''), r.agent, '') as agent, f.status, f.steps, "
                "f.started_at from session_facts f left join r using (run_id) "
                "where f.session_id in (select session_id from h)), "
                "p as (select h.session_id, h.step, h.fields, h.text, s.run_id, s.task_id, "
                "s.agent, s.status, s.steps, s.started_at, count(*) over () as total "
                f"from h join s using (session_id) where {' and '.join(where)} {order} "
                "limit $limit offset $offset) "
                "select session_id, step, fields, text, run_id, task_id, agent, status, "
                "(select arg_max(sha256, time) from screenshot_taken t where t.session_id = "
                "p.session_id and t.step = coalesce(p.step, p.steps)) as shot, total "
                f"from p {order}",
                {**params, "limit": int(limit), "offset": int(offset)},
            ),
            SESSION_CHOICES,
        ]
    )
    if found.rows:
        total = int(found.rows[0][-1])
    elif offset:  # past the last page: the first page says how many there are
        total = search_steps(store, text, filters, 1, 0).total
    else:
        total = 0
    return SearchPage([row[:-1] for row in found.rows], total, session_choices_of(choices))
