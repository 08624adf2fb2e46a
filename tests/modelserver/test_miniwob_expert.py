"""The MiniWoB expert over HTTP, checked in real pages: its clicks land and its plans earn rewards.

Two Chromiums at most: the expert's own (one thread) and the shared test browser where the
episodes are played from the expert's rendered text, through the uitars agent's own
build_messages, parse and translate.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai import OpenAI

from ownloop.agents import make_agent
from ownloop.agents.base import Observation, PastStep
from ownloop.modelserver import ModelServer
from ownloop.modelserver.expert import MiniwobExpert
from ownloop.recorder.model import wire_messages
from ownloop.store.events import Click, ImagePart, Task
from ownloop.world.suites.miniwob import MiniwobSuite, read_reward, start_episode

SEED = 42


@pytest.fixture(scope="module")
def miniwob() -> Iterator[MiniwobSuite]:
    with MiniwobSuite() as suite:
        yield suite


@pytest.fixture(scope="module")
def expert() -> Iterator[MiniwobExpert]:
    responder = MiniwobExpert("uitars")
    yield responder
    responder.close()


@pytest.fixture(scope="module")
def api(expert: MiniwobExpert) -> Iterator[OpenAI]:
    with ModelServer(expert) as url:
        yield OpenAI(base_url=url, api_key="test-key", max_retries=0, timeout=60)


class _Episode:
    """A uitars session against the expert, played in a real page (the recorder's loop, small)."""

    def __init__(self, api: OpenAI, session: Any, task: Task) -> None:
        self.agent = make_agent("uitars")
        self.api, self.session, self.task = api, session, task
        self.blobs: dict[str, bytes] = {}
        self.history: list[PastStep] = []

    def ask(self) -> tuple[str, Any, tuple[int, int]]:
        shot = self.session.screenshot()
        sha = hashlib.sha256(shot.png).hexdigest()
        self.blobs[sha] = shot.png
        now = Observation(
            len(self.history), ImagePart(sha256=sha, width=shot.width, height=shot.height), shot.url
        )
        messages = self.agent.build_messages(self.task, self.history, now)
        wire = wire_messages(messages, self._data_url)
        reply = self.api.chat.completions.create(model="expert", messages=wire, temperature=0)
        text = reply.choices[0].message.content
        parsed = self.agent.parse(text, (shot.width, shot.height))
        self.history.append(PastStep(now, text, parsed))
        return text, parsed, (shot.width, shot.height)

    def _data_url(self, part: ImagePart) -> str:
        return "data:image/png;base64," + base64.b64encode(self.blobs[part.sha256]).decode()

    def play(self, max_steps: int = 10) -> str | None:
        """Ask, translate, execute until the agent's own ending says stop; the answer."""
        for _ in range(max_steps):
            _, parsed, _ = self.ask()
            ending = self.agent.ending(parsed, self.history[:-1])
            if ending is not None:
                assert ending.status == "finished"
                return ending.answer
            for action in parsed.actions:
                for op in self.agent.translate(action):
                    effect = self.session.execute(op)
                    assert effect.ok, effect.error
        raise AssertionError(f"no finished() within {max_steps} steps")


def _start(miniwob: MiniwobSuite, session: Any, name: str, seed: int = SEED) -> Task:
    url = miniwob.task_url(name, seed)
    prompt = start_episode(session, seed, url=url)
    return Task(task_id=f"{name}-{seed}", prompt=prompt, start_url=url, suite="miniwob", seed=seed)


@pytest.mark.browser
def test_click_button_lands_inside_the_right_button(miniwob, api, new_session):
    session = new_session((1280, 800))
    task = _start(miniwob, session, "click-button")
    text, parsed, size = _Episode(api, session, task).ask()
    assert size == (1280, 800) and "click(start_box='(" in text
    (click,) = parsed.actions
    assert isinstance(click, Click) and click.model_x is not None
    label = task.prompt.split('"')[1]
    box = session.evaluate(
        """(label) => [...document.querySelectorAll('#area button')]
             .filter((b) => b.innerText === label)
             .map((b) => { const r = b.getBoundingClientRect();
                           return [r.left, r.top, r.right, r.bottom]; })[0]""",
        label,
    )
    left, top, right, bottom = box
    assert left < click.x < right and top < click.y < bottom
    under = session.evaluate(
        "([x, y]) => document.elementFromPoint(x, y).innerText", [click.x, click.y]
    )
    assert under == label


@pytest.mark.browser
@pytest.mark.parametrize(
    "name",
    [
        "click-button",
        "click-link",
        "enter-text",
        "focus-text",
        "click-checkboxes",
        "login-user",
        "click-dialog",
        "click-tab",
        "enter-password",
        "click-option",
    ],
)
def test_the_expert_plan_earns_a_reward_in_a_real_page(miniwob, api, new_session, name):
    session = new_session((1280, 800))
    task = _start(miniwob, session, name)
    _Episode(api, session, task).play()
    outcome = read_reward(session)
    assert outcome is not None and outcome["reward"] > 0, outcome


@pytest.mark.browser
def test_the_screenshot_size_in_the_request_sets_the_coordinate_space(miniwob, api, new_session):
    """The same episode at another viewport: the click is rendered in that image's model space."""
    session = new_session((1024, 768))
    task = _start(miniwob, session, "click-button", seed=7)
    episode = _Episode(api, session, task)
    _, parsed, size = episode.ask()
    assert size == (1024, 768)
    (click,) = parsed.actions
    under = session.evaluate(
        "([x, y]) => document.elementFromPoint(x, y).tagName", [click.x, click.y]
    )
    assert under == "BUTTON"


@pytest.mark.browser
def test_plans_are_made_once_per_episode_and_viewport(miniwob, expert):
    url = miniwob.task_url("focus-text", 3)
    first = expert.plan(url, (1280, 800))
    assert expert.plan(url, (1280, 800)) is first
    assert first.reward is not None and first.reward > 0
    assert first.steps[-1].actions[0].answer == ""


def test_a_request_for_an_unknown_task_is_a_400_that_says_why(api):
    prompt = (
        "You are interacting with a web application at "
        "http://127.0.0.1:9/miniwob/book-flight.html?seed=1. Your task: Book a flight."
    )
    with pytest.raises(openai.BadRequestError, match="cannot do 'book-flight'; it knows"):
        api.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}])


def test_a_task_off_miniwob_that_spells_out_no_step_is_a_400_that_says_what_it_reads(api):
    prompt = (
        "You are interacting with a web application at http://127.0.0.1:9/form. "
        "Your task: Save a record: Quarterly, 42"
    )
    with pytest.raises(
        openai.BadRequestError, match=r'is not a MiniWoB task page .* \(type "TEXT" into "LABEL"'
    ):
        api.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}])
