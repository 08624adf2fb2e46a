"""The MiniWoB expert's plans kept on disk, so that a machine plans each episode once.

Planning opens the episode in a headless Chromium (seconds); every ``serve-model`` process would
otherwise pay that for every episode it is asked about. A plan depends on what the page is, not
on where it is served: the key (:func:`plan_key`) is a sha256 over the bytes of the task page and
of the scripts and stylesheets it links (:func:`page_digest`, fetched from the suite's server:
an altered layout is another plan), the task, seed, viewport and rehearsal, the planner's own
source (:func:`planner_digest`: an edit to the planner is a new plan) and the ``--chromium`` or
``$OWNLOOP_CHROMIUM`` asked for. One JSON file a plan, in ``$OWNLOOP_CACHE/expert-plans`` (else
``$XDG_CACHE_HOME/ownloop/expert-plans``, else ``~/.cache/ownloop/expert-plans``), written
atomically; a file that does not decode to the plan asked for is ignored and planned again. A
cache that cannot be read or written is no error: the plan is made in the browser.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import msgspec

from ownloop.modelserver.plans import Plan
from ownloop.world.suites import miniwob
from ownloop.world.suites.miniwob import cache_dir, page_links

__all__ = ["PlanCache", "page_digest", "plan_key", "planner_digest"]

_FORMAT = 1  # the file's encoding: a new one never reads an old file
_FETCH_TIMEOUT_S = 10.0
_LOCK_WAIT_S = 120.0  # another process planning the same episode is waited for this long at most

# What the plan is made by: the expert, its planners and page reader, and the episode's start.
_PLANNER_SOURCES = ("expert.py", "plans.py", "page_facts.js", "plan_cache.py")


@functools.cache
def planner_digest() -> str:
    """The sha256 of the planner's own source (the expert, ``plans.py``, ``page_facts.js`` and
    the MiniWoB suite's episode start): any edit to them makes every plan anew."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for path in (*(here / name for name in _PLANNER_SOURCES), Path(miniwob.__file__)):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=_FETCH_TIMEOUT_S) as response:
        return bytes(response.read())


def page_digest(start_url: str) -> str | None:
    """The sha256 of the task page served at ``start_url`` and of every script and stylesheet it
    links (``page_links``) on the same server (others count by their address); None when the
    page cannot be fetched (the plan then says why, from the browser)."""
    try:
        page = _get(start_url)
    except (OSError, ValueError):  # urllib's errors are OSErrors; ValueError: not a URL
        return None
    digest = hashlib.sha256(hashlib.sha256(page).digest())
    origin = urlsplit(start_url)[:2]
    for link in page_links(page.decode("utf-8", errors="replace")):
        url = urljoin(start_url, link)
        digest.update(b"\0" + link.encode() + b"\0")
        if urlsplit(url)[:2] == origin:
            try:
                digest.update(hashlib.sha256(_get(url)).digest())
            except urllib.error.HTTPError as exc:  # a missing script is part of the page
                digest.update(f"HTTP {exc.code}".encode())
            except (OSError, ValueError):
                return None
    return digest.hexdigest()


def plan_key(
    page: str,
    task: str,
    seed: int,
    viewport: tuple[int, int],
    *,
    rehearse: bool,
    chromium: str | None = None,
) -> str:
    """The sha256 naming the plan of ``task`` and ``seed`` in a page of ``viewport`` whose
    digest (:func:`page_digest`) is ``page``, made in the Chromium ``chromium`` names (else
    ``$OWNLOOP_CHROMIUM``, else the one found: the machine's own, which is not looked at)."""
    facts = {
        "format": _FORMAT,
        "planner": planner_digest(),
        "page": page,
        "task": task,
        "seed": seed,
        "viewport": list(viewport),
        "rehearse": rehearse,
        "chromium": chromium or os.environ.get("OWNLOOP_CHROMIUM", ""),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


class PlanCache:
    """Plans by key in ``folder`` (default ``cache_dir() / "expert-plans"``, read when made)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder if folder is not None else cache_dir() / "expert-plans"

    def _path(self, key: str, plan_of: tuple[str, int, tuple[int, int]]) -> Path:
        task, seed, (width, height) = plan_of
        return self.folder / f"{task}-{seed}-{width}x{height}-{key[:32]}.json"

    def get(self, key: str, plan_of: tuple[str, int, tuple[int, int]]) -> Plan | None:
        """The plan kept under ``key`` for (task, seed, viewport) ``plan_of``, or None when there
        is none or its file does not decode to that plan (torn, edited, another format)."""
        try:
            data = self._path(key, plan_of).read_bytes()
            plan = msgspec.json.decode(data, type=Plan)
        except (OSError, msgspec.DecodeError):  # ValidationError is a DecodeError
            return None
        task, seed, viewport = plan_of
        if (plan.task, plan.seed, plan.viewport) != (task, seed, viewport) or not plan.steps:
            return None
        return plan

    def put(self, key: str, plan: Plan) -> None:
        """Keep ``plan`` under ``key``: written to a temporary file and renamed into place, so a
        reader never sees half a plan."""
        path = self._path(key, (plan.task, plan.seed or 0, plan.viewport))
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            temporary.write_bytes(msgspec.json.encode(plan))
            os.replace(temporary, path)
        except OSError:
            temporary.unlink(missing_ok=True)

    @contextmanager
    def planning(self, key: str) -> Iterator[None]:
        """Held while this process plans ``key``: another process planning the same episode at
        the same time waits (at most ``_LOCK_WAIT_S``) and then reads the plan made."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle = open(self.folder / f".{key[:32]}.lock", "a")  # closed below
        except OSError:
            yield
            return
        with handle:
            deadline = time.monotonic() + _LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break  # a stuck planner elsewhere: plan here
                    time.sleep(0.05)
            yield  # the lock goes with the file (or the process)
