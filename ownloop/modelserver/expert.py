"""The MiniWoB expert: answers like a competent model, in an agent's own output grammar.

Every agent states the task with its start URL, and a MiniWoB start URL carries its seed, so the
expert can open the very same episode in its own headless page, read the elements, plan the whole
episode (``plans.py``) and rehearse it there. Step k of a session (k = the steps already taken,
``chat.steps_taken``) is answered with the plan's k-th step, rendered by the agent itself
(``agent.render``) for the screenshot size found in the request: its coordinate mapping and
grammar are the agent's own, so a run that earns a reward proves the whole chain.

A task on any other page is done if its prompt spells out its steps (``type "TEXT" into "LABEL"``,
``click "NAME"``, see ``plans.read_instructions``): the expert opens the start page in its own
fresh browser context, finds each named field or button in the page as it is then, and plays the
instruction there before reading the page for the next one. Its context has none of the task's
setup (cookies, logins), so the fields of every page after the first must appear without it.

All browser work runs on one dedicated thread (Playwright's sync objects are bound to the thread
that made them); plans are kept in memory per (start URL, viewport), and on disk by what the page
is (``plan_cache.py``), so another ``serve-model`` asked about the same episode launches no
Chromium.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec

from ownloop.errors import OwnloopError
from ownloop.modelserver.chat import (
    BadRequest,
    Reply,
    find_task,
    last_image_size,
    steps_taken,
    thinking_requested,
)
from ownloop.modelserver.noise import Noise, mislead
from ownloop.modelserver.plan_cache import PlanCache, page_digest, plan_key
from ownloop.modelserver.plans import (
    INSTRUCTION_FORMS,
    PLANNED_TASKS,
    Instruction,
    PageFacts,
    Plan,
    Step,
    UnplannableTask,
    Widget,
    finish_step,
    plan_episode,
    plan_instruction,
    read_instructions,
)
from ownloop.store.events import Click, KeyboardType, MouseClick, TypeText

__all__ = ["BrowserThread", "MiniwobExpert", "Plan"]

_SLOW_PLAN_S = 5.0  # a later plan taking longer than this is noticed too
_FIND_WAIT_S = 5.0  # how long a named field or button may take to appear (a page loading)

_FACTS_JS = Path(__file__).with_name("page_facts.js").read_text(encoding="utf-8")


class BrowserThread:
    """One thread that owns a Playwright driver and Chromium; ``call(fn)`` runs fn(browser) there.

    The browser starts with the first call and is relaunched if it died; ``launches`` counts
    the Chromiums started so far.
    """

    def __init__(self, chromium: str | None = None) -> None:
        self.chromium = chromium
        self.launches = 0
        self._jobs: queue.Queue[tuple[Callable[[Any], Any], Future[Any]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(browser)`` on the browser thread and return its result (or raise its error)."""
        future: Future[Any] = Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._serve, name="ownloop-expert-browser", daemon=True
                )
                self._thread.start()
            self._jobs.put((fn, future))
        return future.result()

    def close(self) -> None:
        """Close the browser and end the thread; safe to call twice."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._jobs.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)

    def _serve(self) -> None:
        from ownloop.world.chromium import open_browser  # Playwright loads on this thread only

        launched = None
        try:
            while (job := self._jobs.get()) is not None:
                fn, future = job
                try:
                    if launched is None or not launched.browser.is_connected():
                        if launched is not None:
                            launched.close()
                        self.launches += 1
                        launched = open_browser(self.chromium)
                    future.set_result(fn(launched.browser))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                    future.set_exception(exc)
        finally:
            if launched is not None:
                launched.close()


class MiniwobExpert:
    """A responder that solves MiniWoB tasks in ``agent``'s output grammar.

    Args:
        agent: the ownloop agent whose grammar and coordinate space the answers use.
        chromium: a Chromium executable overriding discovery.
        rehearse: play each plan in the expert's own page first and keep the reward it earned.
        notice: told, in a line, that the first plan is being made (it starts a browser and
            opens the episode: seconds, while the request waits) and when it is ready, of any
            later plan that took longer than ``_SLOW_PLAN_S``, and of the first plan read from
            the plan cache.
        noise: seeded wrong answers (``serve-model --noise P``); None: always right.
    """

    def __init__(
        self,
        agent: str,
        *,
        chromium: str | None = None,
        rehearse: bool = True,
        notice: Callable[[str], None] | None = None,
        noise: Noise | None = None,
    ) -> None:
        from ownloop.agents import make_agent

        self.agent = make_agent(agent)
        self.noise = noise
        self.rehearse = rehearse
        self.browser = BrowserThread(chromium)
        self._plans: dict[tuple[str, str, tuple[int, int]], Future[Plan]] = {}
        self._lock = threading.Lock()
        self._notice = notice
        self._told: set[str] = set()  # the first-time notices already given

    def __call__(self, request: dict[str, Any]) -> Reply:
        statement = find_task(request)
        if statement is None:
            raise BadRequest(
                "no task in the request: the expert looks for 'You are interacting with a "
                "web application at URL. Your task: ...'",
            )
        size = self.page_size(last_image_size(request))
        try:
            plan = self.plan(statement.start_url, size, statement.prompt)
        except OwnloopError as exc:
            raise BadRequest(str(exc)) from None
        index = min(steps_taken(request), len(plan.steps) - 1)
        step = plan.steps[index]
        actions = step.actions
        if getattr(self.agent, "types_at_a_point", False):
            actions = _with_typing_point(plan.steps, index)
        # keyed by the episode (task and seed), not the suite server's address, which changes
        # from one record to the next: the same --noise-seed gives the same draws in every run
        task, seed = _episode(statement.start_url, statement.prompt)
        pick = (
            None
            if self.noise is None
            else self.noise.wrong(f"{task} seed {seed} {size[0]}x{size[1]} step {index}")
        )
        if pick is not None:
            actions = mislead(actions, plan.widgets, pick)
        text = self.agent.render(step.thought, actions, size)
        if thinking_requested(request):  # as a thinking model's template makes it answer
            text = f"<think>{step.thought}</think>\n{text}"
        return Reply(text)

    def page_size(self, sent: tuple[int, int] | None) -> tuple[int, int]:
        """The page size behind an image of size ``sent``: the agent's viewport when that is
        what it sends at its own viewport (Fara resizes 1440x900 to 1428x896), else ``sent``."""
        viewport = self.agent.settings.viewport
        if sent is None:
            return viewport
        resize = getattr(self.agent, "sent_image_size", None)
        return viewport if resize is not None and resize(viewport) == sent else sent

    def plan(self, start_url: str, viewport: tuple[int, int], prompt: str = "") -> Plan:
        """The plan for the episode at ``start_url`` in a page of ``viewport``, made once; off
        MiniWoB, the plan of the steps ``prompt`` spells out.

        Raises:
            UnplannableTask: the task type is not one the expert knows.
            OwnloopError: the episode could not be opened (e.g. the suite's server is gone).
        """
        _episode(start_url, prompt)  # an unknown task fails here, before any browser work
        key = (start_url, prompt, viewport)
        with self._lock:
            future = self._plans.get(key)
            owner = future is None
            if future is None:
                future = self._plans[key] = Future()
        if owner:
            try:
                future.set_result(self._kept_or_made(start_url, viewport, prompt))
            except BaseException as exc:
                with self._lock:
                    del self._plans[key]  # a failure is not cached: the next call tries again
                future.set_exception(exc)
        return future.result()

    def _kept_or_made(self, start_url: str, viewport: tuple[int, int], prompt: str) -> Plan:
        """The plan from the plan cache, else made in the browser (and then kept there). A task
        that spells out its steps is planned on its live page every time (never kept)."""

        def make() -> Plan:
            return self._timed(
                start_url,
                prompt,
                lambda: self.browser.call(
                    lambda b: self._make_plan(b, start_url, viewport, prompt)
                ),
            )

        name, seed = _episode(start_url, prompt)
        if seed is None:
            return make()
        page = page_digest(start_url)
        if page is None:  # the page does not answer: the browser says why
            return make()
        key = plan_key(
            page, name, seed, viewport, rehearse=self.rehearse, chromium=self.browser.chromium
        )
        cache = PlanCache()
        plan_of = (name, seed, viewport)
        plan = cache.get(key, plan_of)
        if plan is None:
            with cache.planning(key):  # another server planning it now: wait, then read it
                plan = cache.get(key, plan_of)
                if plan is None:
                    plan = make()
                    if plan.reward is None or plan.reward > 0:  # a failed rehearsal: made anew
                        cache.put(key, plan)
                    return plan
        if self._first("reused") and self._notice is not None:
            self._notice(
                f"expert: plan for {name} (seed {seed}) read from the plan cache "
                f"{cache.folder}: {_summary(plan)}, no browser started"
            )
        return plan

    def _timed(self, start_url: str, prompt: str, make: Callable[[], Plan]) -> Plan:
        """``make()``, with a notice before the first plan and after it (or a slow later one)."""
        name, seed = _episode(start_url, prompt)
        first = self._first("planned")
        if first and self._notice is not None:
            self._notice(
                f"expert: planning {name} (seed {seed}), the first plan: it starts a "
                "headless Chromium and solves the episode there, a few seconds"
            )
        began = time.monotonic()
        plan = make()
        seconds = time.monotonic() - began
        if self._notice is not None and (first or seconds > _SLOW_PLAN_S):
            self._notice(
                f"expert: plan for {name} (seed {seed}) ready in {seconds:.1f}s: {_summary(plan)}"
            )
        return plan

    def _first(self, what: str) -> bool:
        """True the first time it is asked about ``what`` ("planned", "reused"), then False."""
        with self._lock:
            first = what not in self._told
            self._told.add(what)
        return first

    def close(self) -> None:
        """Close the expert's browser."""
        self.browser.close()

    # ------------------------------------------------------------------ on the browser thread

    def _make_plan(
        self, browser: Any, start_url: str, viewport: tuple[int, int], prompt: str
    ) -> Plan:
        from ownloop.world.browser import BrowserSession
        from ownloop.world.suites.miniwob import read_reward, start_episode

        name, seed = _episode(start_url, prompt)
        session = BrowserSession(browser, viewport, settle_s=0.0, event_grace_s=0.0)
        try:
            if seed is None:
                return self._plan_instructions(session, name, start_url, viewport, prompt)
            start_episode(session, seed, url=start_url)
            raw = session.evaluate(_FACTS_JS)
            facts = msgspec.convert({"task": name, **raw}, PageFacts)
            steps = plan_episode(facts)
            reward = None
            if self.rehearse:
                for step in steps:
                    for action in step.actions:
                        _perform(session, action)
                outcome = read_reward(session) or {}
                reward = outcome.get("reward")
            return Plan(name, seed, viewport, steps, reward, facts.widgets)
        finally:
            session.close()

    def _plan_instructions(
        self, session: Any, name: str, start_url: str, viewport: tuple[int, int], prompt: str
    ) -> Plan:
        """The steps ``prompt`` spells out, each found in the expert's page as it is when its
        turn comes (the earlier ones played there first); no reward: the suite grades."""
        session.goto(start_url)
        steps: list[Step] = []
        widgets: tuple[Widget, ...] = ()
        for instruction in read_instructions(prompt):
            facts = _facts_for(session, name, instruction)
            widgets = widgets or facts.widgets
            planned = plan_instruction(facts, instruction)
            for step in planned:
                for action in step.actions:
                    _perform(session, action)
            steps.extend(planned)
        return Plan(name, None, viewport, (*steps, finish_step()), None, widgets)


def _facts_for(session: Any, name: str, instruction: Instruction) -> PageFacts:
    """The page's facts once ``instruction``'s field or button is in it (a click before may
    still be loading the next page), or as they are after ``_FIND_WAIT_S``."""
    deadline = time.monotonic() + _FIND_WAIT_S
    while True:
        facts = msgspec.convert({"task": name, **session.evaluate(_FACTS_JS)}, PageFacts)
        try:
            plan_instruction(facts, instruction)
            return facts
        except UnplannableTask:
            if time.monotonic() > deadline:
                return facts  # planning it again raises the one-line error
        time.sleep(0.1)


def _episode(start_url: str, prompt: str) -> tuple[str, int | None]:
    """(MiniWoB task, seed) of a MiniWoB task URL, else (start page path, None) for a task whose
    prompt spells out its steps.

    Raises:
        UnplannableTask: neither (the message says what the expert reads).
    """
    if PurePosixPath(urlsplit(start_url).path).parent.name == "miniwob":
        return _task_and_seed(start_url)
    try:
        read_instructions(prompt)
    except UnplannableTask:
        raise UnplannableTask(
            f"{start_url} is not a MiniWoB task page (.../miniwob/NAME.html?seed=N) and its "
            f"task spells out no step the expert reads ({INSTRUCTION_FORMS})"
        ) from None
    return urlsplit(start_url).path or "/", None


def _task_and_seed(start_url: str) -> tuple[str, int]:
    """The MiniWoB task name and seed of a start URL like .../miniwob/click-button.html?seed=7.

    Raises:
        UnplannableTask: it is not a MiniWoB task URL, or not a task the expert knows.
    """
    from ownloop.world.suites.miniwob import default_seed

    parts = urlsplit(start_url)
    path = PurePosixPath(parts.path)
    if path.parent.name != "miniwob" or path.suffix != ".html":
        raise UnplannableTask(
            f"{start_url} is not a MiniWoB task page (expected .../miniwob/NAME.html?seed=N)"
        )
    if path.stem not in PLANNED_TASKS:
        raise UnplannableTask(
            f"the miniwob expert cannot do {path.stem!r}; it knows: {', '.join(PLANNED_TASKS)}"
        )
    seeds = parse_qs(parts.query).get("seed", [])
    seed = int(seeds[0]) if seeds and seeds[0].isdigit() else default_seed(path.stem)
    return path.stem, seed


def _summary(plan: Plan) -> str:
    reward = "" if plan.reward is None else f", rehearsal reward {plan.reward:g}"
    return f"{len(plan.steps)} steps{reward}"


def _with_typing_point(steps: tuple[Step, ...], index: int) -> tuple[Any, ...]:
    """Step ``index``'s actions, with the previous step's click before text typed on its own:
    an agent whose ``type`` clicks its point first (fara7b) needs the field's point."""
    actions = steps[index].actions
    if index > 0 and actions and isinstance(actions[0], TypeText):
        before = steps[index - 1].actions
        if before and isinstance(before[-1], Click):
            return (before[-1], *actions)
    return actions


def _perform(session: Any, action: Any) -> None:
    if isinstance(action, Click):
        session.execute(MouseClick(x=action.x, y=action.y))
    elif isinstance(action, TypeText):
        session.execute(KeyboardType(text=action.text))
