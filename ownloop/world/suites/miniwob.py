"""The ``--suite miniwob[:GLOB[,GLOB...]]`` suite: MiniWoB++ pages from the ``miniwob`` package.

The pages are served by a threaded static server on 127.0.0.1 (ephemeral port) that the suite
starts on first use and stops on ``__exit__``. Each task runs once per seed (``--seeds``, else one
fixed seed derived from the task's name, so runs repeat); its id is ``<name>-<seed>`` and the seed
is in the start URL's query. An episode is started as DESIGN §5 says (:func:`start_episode`).

The prompt is the episode's utterance, which only the page can compute. Because the recorder
writes the Task (prompt included) before the session's first step, :meth:`MiniwobSuite.tasks`
opens every seeded episode once in a headless page to read it: in the caller's thread when the
suite was given a ``browser`` made on that thread, else on a private thread with its own
Chromium (1.6-2 s per command). What it read is kept in a prompt cache
(``$OWNLOOP_CACHE``, else ``$XDG_CACHE_HOME/ownloop``, else ``~/.cache/ownloop``), one file per
task page, named by the hash of the miniwob release, the page's bytes and those of the scripts
and stylesheets it links (:func:`page_links`): the same page and seed give the same utterance,
so a later command reads the file and launches no browser. The cache is
never trusted blindly: :meth:`MiniwobSuite.prepare` starts the same episode in the session and
checks that it shows the task's utterance. The reward (raw, time-scaled, done, reason) is the
suite's evidence.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import threading
import zlib
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from ownloop.errors import OwnloopError
from ownloop.store.events import Task
from ownloop.store.extras import install_hint
from ownloop.store.template import cache_dir
from ownloop.world.browser_evidence import Evidence

if TYPE_CHECKING:
    from ownloop.world.browser import Browser, BrowserSession

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MiniwobSuite",
    "cache_dir",
    "default_seed",
    "html_dir",
    "page_links",
    "parse_seeds",
    "read_reward",
    "start_episode",
]

DEFAULT_TIMEOUT_S = 1800.0  # DESIGN §5's per-task limit; MiniWoB's own 10 s is under one step

_START_JS = """async ([seed, maxMs, waitMs]) => {
  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
  const t0 = Date.now();
  while (!(document.readyState === "complete" && window.core && core.cover_div
           && typeof genProblem === "function")) {
    if (Date.now() - t0 > waitMs) throw new Error("not a MiniWoB page: " + location.href);
    await sleep(20);
  }
  core.endEpisode(0);
  Math.seedrandom(seed);
  core.setDataMode("train");
  core.EPISODE_MAX_TIME = maxMs;
  window.OWNLOOP_EPISODE = null;
  if (!core.ownloopKeepsFirst) {
    // The sync cover starts a new episode when clicked; keep the first episode's outcome.
    const end = core.endEpisode;
    core.endEpisode = function () {
      const running = core.EP_TIMER !== null;
      const out = end.apply(this, arguments);
      if (running && !window.OWNLOOP_EPISODE) {
        window.OWNLOOP_EPISODE = {reward: WOB_REWARD_GLOBAL, raw_reward: WOB_RAW_REWARD_GLOBAL,
                                  done: WOB_DONE_GLOBAL, reason: WOB_REWARD_REASON};
      }
      return out;
    };
    core.ownloopKeepsFirst = true;
  }
  core.startEpisodeReal();
  while (!WOB_TASK_READY) {
    if (Date.now() - t0 > waitMs) throw new Error("MiniWoB task never became ready");
    await sleep(20);
  }
  return core.getUtterance();
}"""

_REWARD_JS = """() => {
  if (!window.core) return null;
  return window.OWNLOOP_EPISODE || {reward: WOB_REWARD_GLOBAL, raw_reward: WOB_RAW_REWARD_GLOBAL,
                                    done: WOB_DONE_GLOBAL, reason: WOB_REWARD_REASON};
}"""


class MiniwobError(OwnloopError):
    pass


@functools.cache  # found once a process (a batch replay reopens the suite for every session)
def html_dir() -> Path:
    """The ``html`` folder of the installed ``miniwob`` package (found without importing it)."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise MiniwobError(
            "the MiniWoB++ suite needs the record extra (miniwob is not "
            f"installed): {install_hint('record')}"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "html"


@functools.cache  # read once a process: every replayed session opens its suite again
def _package_version() -> str:
    try:
        return importlib.metadata.version("miniwob")
    except importlib.metadata.PackageNotFoundError:
        return ""


def default_seed(name: str) -> int:
    """The fixed seed of a task when ``--seeds`` is not given (stable across runs and machines)."""
    return zlib.crc32(name.encode()) % 100_000


def parse_seeds(text: str) -> list[int]:
    """Seeds from ``--seeds``: comma-separated integers and inclusive ranges, e.g. ``1,2,10-19``.

    Raises:
        MiniwobError: the text is not such a list.
    """
    seeds: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise MiniwobError(f"bad --seeds {text!r}: use integers and ranges, e.g. 1,2,10-19")
        first, last = int(low), int(high) if dash else int(low)
        if last < first or last - first >= 10_000:
            raise MiniwobError(f"bad --seeds range {part.strip()!r}: at most 10000 seeds, low-high")
        seeds.extend(range(first, last + 1))
    return list(dict.fromkeys(seeds))


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "script" and found.get("src"):
            self.links.append(str(found["src"]))
        elif tag == "link" and found.get("href"):
            if "stylesheet" in (found.get("rel") or "").lower().split():
                self.links.append(str(found["href"]))


def page_links(html: str) -> list[str]:
    """The scripts (``<script src>``) and stylesheets (``<link rel=stylesheet href>``) an HTML
    page links, as written and in document order, each once: with the page, what makes its
    layout and its utterance."""
    parser = _Links()
    parser.feed(html)
    return list(dict.fromkeys(parser.links))


def start_episode(
    target: Any,
    seed: int,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    *,
    url: str | None = None,
    wait_s: float = 10.0,
) -> str:
    """Start the seeded episode in a MiniWoB page and return its utterance.

    ``core.endEpisode(0); Math.seedrandom(seed); core.setDataMode('train')``, then
    ``core.EPISODE_MAX_TIME`` raised to ``timeout_s``, ``core.startEpisodeReal()`` and a wait for
    ``WOB_TASK_READY``. The same task and seed always give the same utterance and layout.

    Args:
        target: a ``BrowserSession`` or a Playwright ``Page`` (anything with ``goto`` and
            ``evaluate(js, arg)``), showing the task page or about to.
        seed: the episode's seed.
        timeout_s: the episode's time limit (its timer ends it with reward -1).
        url: open this task page first.
        wait_s: how long to wait for the page and the task to be ready.
    """
    if url is not None:
        target.goto(url)
    return str(target.evaluate(_START_JS, [seed, int(timeout_s * 1000), int(wait_s * 1000)]))


def read_reward(target: Any) -> dict[str, Any] | None:
    """The episode's reward ``{"reward", "raw_reward", "done", "reason"}``, None off MiniWoB.

    The first finished episode's outcome is kept even if the page's START cover was clicked after.
    """
    return target.evaluate(_REWARD_JS)  # type: ignore[no-any-return]


class _QuietHandler(SimpleHTTPRequestHandler):
    disable_nagle_algorithm = True  # small files on loopback: no 40 ms delayed-ACK stalls

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass


class _StaticServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A browser that hung up mid-response (a closed page, a dropped favicon) is no error."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def serve_static(root: Path, port: int = 0, *, poll_interval: float = 0.5) -> ThreadingHTTPServer:
    """A quiet static file server for ``root`` on 127.0.0.1, serving from a daemon thread.

    ``port`` 0 picks a free port; an ``OSError`` says a given port is taken.
    """
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = _StaticServer(("127.0.0.1", port), handler)
    serve = functools.partial(server.serve_forever, poll_interval=poll_interval)
    threading.Thread(target=serve, name=f"static:{port}", daemon=True).start()
    return server


class MiniwobSuite:
    """MiniWoB++ tasks matching a glob, one per seed.

    Args:
        pattern: globs over task names, comma-separated, e.g. ``click-*,enter-text`` (default
            all); tasks come in the order of the globs.
        seeds: ``--seeds`` text, else one fixed seed per task.
        browser: a Chromium made on the calling thread to read utterances with; else
            :meth:`tasks` launches a private one (``chromium`` overrides discovery).
    """

    name = "miniwob"
    default_grader = "miniwob"

    def __init__(
        self,
        pattern: str | None = None,
        seeds: str | None = None,
        *,
        browser: Browser | None = None,
        chromium: str | None = None,
    ) -> None:
        self.root = html_dir()
        self.pattern = pattern or "*"
        names = sorted(p.stem for p in (self.root / "miniwob").glob("*.html"))
        chosen: dict[str, None] = {}
        for glob in (part.strip() for part in self.pattern.split(",")):
            matched = [n for n in names if fnmatch.fnmatchcase(n, glob)]
            if not matched:
                raise MiniwobError(f"no MiniWoB task matches {glob!r} (e.g. miniwob:click-*)")
            chosen.update(dict.fromkeys(matched))
        self.names = list(chosen)
        self.seeds = parse_seeds(seeds) if seeds else None
        self._browser = browser
        self._chromium = chromium
        digest = hashlib.sha256((self.root / "core" / "core.js").read_bytes())
        for name in self.names:
            digest.update(name.encode() + (self.root / "miniwob" / f"{name}.html").read_bytes())
        digest.update(repr(self.seeds).encode())
        self.tasks_sha256 = digest.hexdigest()
        self.suite_version = _package_version()  # declared in RunStarted with the hash
        self._server: ThreadingHTTPServer | None = None
        self._tasks: list[Task] | None = None
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- the server
    def __enter__(self) -> MiniwobSuite:
        self.base  # noqa: B018 - starts the server
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            server.shutdown()
            server.server_close()

    @property
    def base(self) -> str:
        """The static server's URL, starting it on first use."""
        with self._lock:
            if self._server is None:
                self._server = serve_static(self.root)
            host, port = self._server.server_address[:2]
            return f"http://{host!s}:{port}"

    def task_url(self, name: str, seed: int) -> str:
        """The start URL of a task and seed on this suite's server."""
        return f"{self.base}/miniwob/{name}.html?seed={seed}"

    # ---------------------------------------------------------------- the suite
    def tasks(self) -> list[Task]:
        """One Task per task name and seed, prompts read from the seeded episodes."""
        if self._tasks is None:
            pairs = [(n, s) for n in self.names for s in (self.seeds or [default_seed(n)])]
            utterances = self._utterances(pairs)
            self._tasks = [
                Task(
                    task_id=f"{name}-{seed}",
                    prompt=utterance,
                    suite=self.name,
                    seed=seed,
                    start_url=self.task_url(name, seed),
                    grader=self.default_grader,
                )
                for (name, seed), utterance in zip(pairs, utterances, strict=True)
            ]
        return list(self._tasks)

    def _utterances(self, pairs: list[tuple[str, int]]) -> list[str]:
        """Each (task, seed)'s utterance: from the prompt cache, else read in a browser (and
        then kept in the cache)."""
        files: dict[Path, bytes] = {}  # each linked file's sha256, hashed once for all pages
        cached = {name: _PromptCache(self.root, name, files) for name, _ in pairs}
        known = {pair: cached[pair[0]].get(pair[1]) for pair in pairs}
        missing = [pair for pair, utterance in known.items() if utterance is None]
        if missing:
            for (name, seed), utterance in zip(missing, self._read(missing), strict=True):
                known[name, seed] = utterance
                cached[name].put(seed, utterance)
            for cache in cached.values():
                cache.save()
        return [str(known[pair]) for pair in pairs]

    def _read(self, pairs: list[tuple[str, int]]) -> list[str]:
        """Each (task, seed)'s utterance, read from its episode in a headless page."""
        from ownloop.world.browser import BrowserSession
        from ownloop.world.chromium import open_browser

        def read(browser: Browser) -> list[str]:
            session = BrowserSession(browser, (1280, 800), settle_s=0)
            try:
                return [
                    start_episode(session, seed, url=self.task_url(name, seed))
                    for name, seed in pairs
                ]
            finally:
                session.close()

        if self._browser is not None:
            return read(self._browser)
        results: list[list[str]] = []
        errors: list[BaseException] = []

        def run() -> None:
            try:
                launched = open_browser(self._chromium)
                try:
                    results.append(read(launched.browser))
                finally:
                    launched.close()
            except BaseException as error:  # noqa: BLE001 - re-raised on the caller's thread
                errors.append(error)

        thread = threading.Thread(target=run, name="miniwob-utterances")
        thread.start()
        thread.join()
        if errors:
            raise errors[0]
        return results[0]

    def prepare(self, session: BrowserSession, task: Task) -> None:
        """Open the task page on this server and start its seeded episode.

        Raises:
            MiniwobError: the episode shows another utterance than the Task's prompt.
        """
        name = PurePosixPath(urlsplit(task.start_url).path).stem
        seed = task.seed if task.seed is not None else default_seed(name)
        utterance = start_episode(
            session, seed, task.timeout_s or DEFAULT_TIMEOUT_S, url=self.task_url(name, seed)
        )
        if utterance != task.prompt:
            raise MiniwobError(
                f"MiniWoB {name} seed {seed} shows {utterance!r}, not the task's prompt "
                f"{task.prompt!r}: this task is not deterministic under a seed"
            )

    def capture(self, session: BrowserSession, task: Task) -> list[Evidence]:
        """The reward of the episode (from the newest open page still showing the task)."""
        for page in reversed(session.pages):
            try:
                reward = read_reward(_OnPage(session, page))
            except OwnloopError:
                continue
            if reward is not None:
                return [Evidence("miniwob_reward", value_json=json.dumps(reward))]
        error = {"piece": "miniwob_reward", "error": f"no MiniWoB page open ({session.page.url})"}
        return [Evidence("capture_error", value_json=json.dumps(error))]


class _PromptCache:
    """The utterances of one MiniWoB task page by seed, kept in one JSON file named by the hash
    of the miniwob release, the page and the files it links (another release, or an edited
    script, is another file). A cache that cannot be read or written is no error: the utterances
    are read in a browser instead."""

    def __init__(self, root: Path, name: str, files: dict[Path, bytes]) -> None:
        page = root / "miniwob" / f"{name}.html"
        html = page.read_bytes()
        digest = hashlib.sha256(f"miniwob {_package_version()}\0".encode())
        digest.update(hashlib.sha256(html).digest())
        for link in page_links(html.decode("utf-8", errors="replace")):
            digest.update(b"\0" + link.encode() + b"\0")
            linked = (page.parent / unquote(urlsplit(link).path)).resolve()
            if not urlsplit(link).netloc and linked.is_relative_to(root.resolve()):
                if linked not in files:
                    try:
                        files[linked] = hashlib.sha256(linked.read_bytes()).digest()
                    except OSError:
                        files[linked] = b"missing"
                digest.update(files[linked])
        self.path = cache_dir() / "miniwob-prompts" / f"{name}-{digest.hexdigest()[:32]}.json"
        self._new: dict[str, str] = {}
        try:
            loaded = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            loaded = {}
        self._seeds = (
            {k: v for k, v in loaded.items() if isinstance(k, str) and isinstance(v, str)}
            if isinstance(loaded, dict)
            else {}
        )

    def get(self, seed: int) -> str | None:
        return self._seeds.get(str(seed))

    def put(self, seed: int, utterance: str) -> None:
        self._new[str(seed)] = utterance

    def save(self) -> None:
        """Write the file with what it held and what was read since (atomically: another
        command may read or write it at the same time)."""
        if not self._new:
            return
        self._seeds.update(self._new)
        self._new = {}
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(self._seeds, ensure_ascii=False, sort_keys=True))
            os.replace(temporary, self.path)
        except OSError:
            temporary.unlink(missing_ok=True)


class _OnPage:
    """A session's ``evaluate`` aimed at one of its pages."""

    def __init__(self, session: BrowserSession, page: Any) -> None:
        self.session, self.page = session, page

    def evaluate(self, js: str, arg: Any = None) -> Any:
        return self.session.evaluate(js, arg, page=self.page)
