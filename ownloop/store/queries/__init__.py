"""The index's queries that other parts need, by name, with every value bound as a parameter.

No code outside ``ownloop/store`` writes SQL text: the recorder, replay, transfer, view and the CLI
call these functions (a tripwire test in ``tests/test_layering.py`` keeps it so). Values (run
ids, task ids, filter text) always reach DuckDB as bound parameters, never as SQL text.

Two kinds of SQL come from the user by design, and each has one door (:mod:`.user`):

- ``user_query``: the whole read-only query of ``ownloop sql``, run as typed;
- ``user_condition``: a condition over the ``sessions`` view (``ownloop regrade --where``), checked
  with DuckDB's own tokenizer to be one parenthesised expression before it joins a query.

The queries live by concern: :mod:`.runs` (sessions and runs by id), :mod:`.selection` (which
sessions, and where their events are), :mod:`.listing` (the viewer's tables), :mod:`.search`,
:mod:`.overview` (a run's page and the compare grid) and :mod:`.audit` (the blind-replay audit);
this module hands their names on.
"""

from __future__ import annotations

from ownloop.store.queries.audit import blind_audit_rows, blind_replayed, passing_sessions
from ownloop.store.queries.listing import (
    RUN_COLUMNS,
    SESSION_COLUMNS,
    Listed,
    Page,
    run_choices,
    run_listing,
    run_page,
    session_choices,
    session_listing,
)
from ownloop.store.queries.overview import (
    Citation,
    RunFigures,
    RunOverview,
    RunUnits,
    run_citation,
    run_figures,
    run_judge_verdicts,
    run_overview,
    run_units_sessions,
    task_rates,
)
from ownloop.store.queries.runs import (
    Neighbours,
    RunSession,
    has_run_started,
    has_session,
    imported_files,
    imported_folders,
    latest_session_of_task,
    require_run,
    run_sessions,
    run_settings,
    session_neighbours,
    target_session,
    task_attempts,
    task_suites,
)
from ownloop.store.queries.search import SEARCH_FILTERS, SearchPage, search_steps
from ownloop.store.queries.selection import (
    EVERY_SESSION,
    Selection,
    journal_places,
    selected_sessions,
    session_places,
)
from ownloop.store.queries.user import sql_command, user_condition, user_query

__all__ = [
    "EVERY_SESSION",
    "Citation",
    "RUN_COLUMNS",
    "SESSION_COLUMNS",
    "RunFigures",
    "RunOverview",
    "RunSession",
    "RunUnits",
    "SEARCH_FILTERS",
    "SearchPage",
    "Selection",
    "has_run_started",
    "has_session",
    "Listed",
    "Neighbours",
    "Page",
    "blind_audit_rows",
    "blind_replayed",
    "imported_files",
    "imported_folders",
    "passing_sessions",
    "require_run",
    "journal_places",
    "session_places",
    "latest_session_of_task",
    "run_choices",
    "run_citation",
    "run_figures",
    "run_judge_verdicts",
    "run_listing",
    "run_overview",
    "run_page",
    "run_sessions",
    "run_settings",
    "run_units_sessions",
    "search_steps",
    "session_neighbours",
    "selected_sessions",
    "session_choices",
    "session_listing",
    "sql_command",
    "target_session",
    "task_attempts",
    "task_suites",
    "task_rates",
    "user_condition",
    "user_query",
]
