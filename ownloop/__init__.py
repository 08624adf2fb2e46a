"""ownloop: record computer-use agents as typed events, query them in SQL, replay them offline.

From Python (a notebook, a script)::

    import ownloop
    store = ownloop.open_store("ownloop-data")
    store.sessions(run="r1").to_pandas()
    store.session("click-button")        # folded, screenshots as PIL images

See ``ownloop.api``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ownloop.api import Recordings, Result, Session, open_store

from ownloop.version import __version__

__all__ = ["Recordings", "Result", "Session", "__version__", "open_store"]

# The API loads DuckDB, pyarrow and the replay folds; `ownloop --version` and the recorder's
# workers import this package without paying for them.
_API = frozenset({"Recordings", "Result", "Session", "open_store"})


def __getattr__(name: str) -> Any:
    if name in _API:
        from ownloop import api

        return getattr(api, name)
    raise AttributeError(f"module 'ownloop' has no attribute {name!r}")
