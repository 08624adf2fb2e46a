"""The threads replays measure their steps on: kept for the process, made again in a fork."""

from __future__ import annotations

import os

from ownloop.replay import players


def test_the_threads_are_kept_across_replays() -> None:
    first = players._measurer()
    assert first.submit(lambda: 1).result(timeout=10) == 1
    assert players._measurer() is first


def test_a_forked_child_measures_on_threads_of_its_own() -> None:
    # The parent's threads do not exist in a child: submitting to the parent's pool there would
    # wait for ever, so the child must make its own.
    parent = players._measurer()
    assert parent.submit(lambda: 1).result(timeout=10) == 1
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if a measurement runs and the pool is new
        ok = False
        try:
            pool = players._measurer()
            ok = pool is not parent and pool.submit(lambda: 42).result(timeout=10) == 42
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
