"""The Python API for notebooks and scripts: a store's sessions and queries as tables, a session
folded from its events with its screenshots as images.

::

    import ownloop
    store = ownloop.open_store("ownloop-data")
    store.sessions(run="r1", status="finished").to_pandas()
    store.sql("select task_id, avg(score) from recorded where run_id = ? group by all", ["r1"])
    session = store.session("click-button")      # a session id, or a task's latest session
    session.screenshots[1]                       # step 1's screenshot, a PIL image

Everything here only reads: the store is the one ``ownloop.store.open_store`` gives (its whole API
stays at ``store.store``), and the index is brought up to date before each query.
"""

from __future__ import annotations

import base64
import html
import io
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ownloop.errors import OwnloopError
from ownloop.replay.fold import Session as FoldedSession
from ownloop.replay.fold import Step
from ownloop.replay.render import actions_text, element_text, op_text
from ownloop.replay.target import load_session
from ownloop.store import Store
from ownloop.store import open_store as _open_store
from ownloop.store.events import Action, BrowserActed, EvidenceCaptured, SessionGraded
from ownloop.store.tables import sessions_table_where, user_table

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from PIL.Image import Image

__all__ = ["Recordings", "Result", "Screenshots", "Session", "open_store"]

_THUMB_WIDTH = 160  # px: a step's screenshot in a notebook's session view
_HTML_STEPS = 100  # steps drawn in a notebook; longer sessions say how many are left out
_HTML_ROWS = 20  # rows of a Result drawn in a notebook


def open_store(path: str | os.PathLike[str] | None = None) -> Recordings:
    """Open the store at ``path`` (default ``$OWNLOOP_STORE``, else ``./ownloop-data``) to read.

    Raises:
        OwnloopError: there is no store at ``path`` (nothing is created).
    """
    return Recordings(_open_store(path, create=False))


class Result:
    """Rows of a query: ``to_arrow()``, ``to_pandas()``, ``to_dicts()``; drawn as a table in
    Jupyter. JSON columns (``actions``, ``viewport``, ...) come as their JSON text."""

    def __init__(self, table: pa.Table) -> None:
        self._table = table

    @property
    def columns(self) -> list[str]:
        return list(self._table.column_names)

    def __len__(self) -> int:
        return int(self._table.num_rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.to_dicts())

    def to_arrow(self) -> pa.Table:
        """The rows as a ``pyarrow.Table``."""
        return self._table

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a ``pandas.DataFrame`` (pandas is not installed with ownloop).

        Raises:
            OwnloopError: pandas is not installed; the message says how to install it.
        """
        try:
            import pandas  # noqa: F401
        except ModuleNotFoundError:
            raise OwnloopError(
                "to_pandas() needs pandas, which ownloop does not install: "
                "pip install pandas (or use to_arrow() or to_dicts())"
            ) from None
        return self._table.to_pandas()

    def to_dicts(self) -> list[dict[str, Any]]:
        """The rows as dicts, column name → value."""
        rows: list[dict[str, Any]] = self._table.to_pylist()
        return rows

    def __repr__(self) -> str:
        return f"<Result {len(self)} row{'s' if len(self) != 1 else ''}: {', '.join(self.columns)}>"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{_esc(name)}</th>" for name in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{_esc(_cell(value))}</td>" for value in row.values()) + "</tr>"
            for row in self._table.slice(0, _HTML_ROWS).to_pylist()
        )
        more = len(self) - _HTML_ROWS
        note = f"{len(self)} rows" + (f", the first {_HTML_ROWS} shown" if more > 0 else "")
        return (
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table><p>{_esc(note)}</p>"
        )


class Recordings:
    """A store opened to read: its sessions and queries as ``Result``s, a session by id or task.

    ``store`` is the ``ownloop.store.Store`` underneath (``sync``, ``verify``, ``events``, ...).
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def path(self) -> str:
        return str(self.store.root)

    def sessions(
        self, run: str | None = None, *, limit: int | None = None, **filters: Any
    ) -> Result:
        """Rows of the ``sessions`` view, newest first.

        Args:
            run: only this run.
            limit: at most this many rows.
            **filters: column = value (``status="finished"``, ``passed=False``, ``task="..."``);
                None means no value, a list or tuple means any of its values.

        Raises:
            OwnloopError: a filter names no column (the message lists them).
        """
        if run is not None:
            filters = {"run_id": run, **filters}
        return Result(sessions_table_where(self.store, filters, limit))

    def sql(self, query: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> Result:
        """Run a read-only DuckDB query; ``params`` bind its ``?`` or ``$name`` placeholders.

        Raises:
            QueryError: the query would change something, or DuckDB rejected it.
        """
        return Result(user_table(self.store, query, params))

    def session(self, target: str, run: str | None = None) -> Session:
        """A session rebuilt from its events: ``target`` is a session id, or a task id (that
        task's latest session, in ``run`` when given), as on the command line.

        Raises:
            OwnloopError: nothing matches ``target``.
        """
        return Session(load_session(self.store, target, run), self.store)

    def __repr__(self) -> str:
        return f"<ownloop store {self.path}>"


class Screenshots(Mapping[int, "Image"]):
    """A session's screenshots by step number, each read from the store when asked for."""

    def __init__(self, steps: Sequence[Step], store: Store) -> None:
        self._sha = {s.step: s.screenshot.sha256 for s in steps if s.screenshot is not None}
        self._store = store

    def __getitem__(self, step: int) -> Image:
        from PIL import Image as PILImage

        if step not in self._sha:
            raise KeyError(f"no screenshot at step {step}; steps with one: {sorted(self._sha)}")
        image = PILImage.open(io.BytesIO(self._store.get_blob(self._sha[step])))
        image.load()
        return image

    def __contains__(self, step: object) -> bool:  # without reading the image
        return step in self._sha

    def __iter__(self) -> Iterator[int]:
        return iter(self._sha)

    def __len__(self) -> int:
        return len(self._sha)

    def __repr__(self) -> str:
        return f"<Screenshots of steps {sorted(self._sha)}>"


class Session:
    """A session folded from its events (``ownloop.replay.fold.Session`` is ``folded``), with
    its screenshots as PIL images on demand; drawn with thumbnails in Jupyter."""

    def __init__(self, folded: FoldedSession, store: Store) -> None:
        self.folded = folded
        self.screenshots = Screenshots(folded.steps, store)

    @property
    def session_id(self) -> str:
        return self.folded.session_id

    @property
    def run_id(self) -> str:
        return self.folded.run_id

    @property
    def task_id(self) -> str:
        return self.folded.task_id

    @property
    def agent(self) -> str:
        return self.folded.agent

    @property
    def model(self) -> str:
        return self.folded.model

    @property
    def status(self) -> str:
        """The end status, or "unfinished"."""
        return self.folded.status

    @property
    def answer(self) -> str | None:
        """The final answer the session ended with, if any."""
        return self.folded.answer

    @property
    def steps(self) -> tuple[Step, ...]:
        """Each step: ``screenshot``, ``calls``, ``parsed``, ``actions``, ``effects``, ..."""
        return self.folded.steps

    @property
    def actions(self) -> list[tuple[int, Action]]:
        """Every accepted action as (step, action), in order."""
        return [(step.step, action) for step in self.steps for action in step.actions]

    @property
    def effects(self) -> list[BrowserActed]:
        """Every browser operation carried out, in order."""
        return [effect for step in self.steps for effect in step.effects]

    @property
    def grades(self) -> tuple[SessionGraded, ...]:
        """Every grade in the order given; the last is the latest."""
        return self.folded.grades

    @property
    def evidence(self) -> tuple[EvidenceCaptured, ...]:
        return self.folded.evidence

    def screenshot(self, step: int) -> Image:
        """Step ``step``'s screenshot as a PIL image."""
        return self.screenshots[step]

    def summary_line(self) -> str:
        return self.folded.summary_line()

    def to_json(self) -> str:
        return self.folded.to_json()

    def __getattr__(self, name: str) -> Any:  # the rest of the folded session, e.g. viewport
        if name == "folded":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.folded, name)

    def __repr__(self) -> str:
        return f"<Session {self.summary_line()}>"

    def _repr_html_(self) -> str:
        session = self.folded
        grade = session.latest_grade
        facts = [
            ("session", session.session_id),
            ("run", session.run_id),
            ("task", session.task_id),
            ("prompt", session.task.prompt if session.task else ""),
            ("agent", f"{session.agent} / {session.model}"),
            ("status", session.status),
            ("steps", str(len(session.steps))),
            (
                "grade",
                f"{'pass' if grade.passed else 'fail'} {grade.score:.2f} ({grade.grader})"
                if grade is not None
                else "ungraded",
            ),
            ("answer", "" if session.answer is None else session.answer),
        ]
        head = "".join(
            f"<tr><th style='text-align:left'>{_esc(k)}</th><td style='text-align:"
            f"left'>{_esc(v)}</td></tr>"
            for k, v in facts
        )
        rows = "".join(self._step_html(step) for step in session.steps[:_HTML_STEPS])
        more = len(session.steps) - _HTML_STEPS
        note = f"<p>{more} more steps not shown</p>" if more > 0 else ""
        return (
            f"<div><table>{head}</table><table><thead><tr><th>step</th><th>screenshot</th>"
            f"<th>thought</th><th>actions</th><th>browser</th></tr></thead><tbody>{rows}"
            f"</tbody></table>{note}</div>"
        )

    def _step_html(self, step: Step) -> str:
        thumb = ""
        if step.step in self.screenshots:
            try:
                thumb = _thumbnail(self.screenshots[step.step])
            except (OwnloopError, OSError) as exc:  # a missing blob, bytes PIL cannot read
                thumb = _esc(f"no screenshot: {exc}")
        effects = "<br>".join(
            _esc(
                f"{op_text(e.op)} {element_text(e.element)}".strip()
                + ("" if e.ok else f" error: {e.error}")
            )
            for e in step.effects
        )
        error = step.parsed.error if step.parsed is not None and step.parsed.error else ""
        actions = actions_text(step.actions) + (f" parse error: {error}" if error else "")
        cells = (_esc(str(step.step)), thumb, _esc(step.thought), _esc(actions), effects)
        return (
            "<tr>"
            + "".join(f"<td style='text-align:left;vertical-align:top'>{c}</td>" for c in cells)
            + "</tr>"
        )


def _thumbnail(image: Image) -> str:
    """An ``<img>`` of ``image`` scaled to the thumbnail width, as an inline JPEG."""
    small = image.convert("RGB")
    small.thumbnail((_THUMB_WIDTH, _THUMB_WIDTH * 4))
    out = io.BytesIO()
    small.save(out, format="JPEG", quality=75)
    data = base64.b64encode(out.getvalue()).decode("ascii")
    return f"<img src='data:image/jpeg;base64,{data}' width='{small.width}' alt='screenshot'>"


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _esc(text: str) -> str:
    return html.escape(text, quote=True)
