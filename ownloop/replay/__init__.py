"""Replay: sessions rebuilt from events, regraded, re-parsed, re-executed, forked.

session = fold(store.session_events(session_id))
print(session.summary_line())
"""

from ownloop.replay.fold import NoSessionEvents, Session, Step, fold, fold_many

__all__ = ["NoSessionEvents", "Session", "Step", "fold", "fold_many"]
