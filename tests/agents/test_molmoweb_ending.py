"""When a MolmoWeb episode ends and what its answer is (DESIGN §4, the released benchmark's rule):
the last "[ANSWER] ..." message, else the last message that is not [EXIT], else the last thought.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ownloop.agents import make_agent
from ownloop.agents.base import Ending, Observation, Parsed, PastStep
from ownloop.agents.molmoweb import MolmoWebAgent
from ownloop.store.events import CallUser, Finish, ImagePart

pytestmark = pytest.mark.filterwarnings("ignore:molmoweb. no clone")


@pytest.fixture
def agent(tmp_path: Path) -> MolmoWebAgent:
    made = make_agent("molmoweb")
    assert isinstance(made, MolmoWebAgent)
    return made


def say(msg: str, thought: str = "") -> str:
    return json.dumps({"thought": thought, "action": {"name": "send_msg_to_user", "msg": msg}})


def click(thought: str) -> str:
    return json.dumps({"thought": thought, "action": {"name": "click", "x": 50, "y": 50}})


def run(agent: MolmoWebAgent, *responses: str) -> list[Ending | None]:
    """The ending of each step, feeding the history as the recorder does."""
    history: list[PastStep] = []
    endings = []
    for step, text in enumerate(responses):
        parsed = agent.parse(text, (1280, 720))
        endings.append(agent.ending(parsed, history))
        shot = ImagePart(sha256=f"{step:064x}", width=1280, height=720)
        history.append(PastStep(Observation(step, shot, "http://x/"), text, parsed))
    return endings


def test_answer_message_ends_with_the_text_after_the_tag(agent: MolmoWebAgent) -> None:
    endings = run(agent, click("look"), say("[ANSWER] 42 apples", "found it"))
    assert endings == [None, Ending("finished", "send_msg_to_user:[ANSWER]", "42 apples")]


def test_exit_ends_with_the_last_answer_given_before(tmp_path: Path) -> None:
    patient = make_agent("molmoweb", end_on_answer=False)
    assert isinstance(patient, MolmoWebAgent)
    endings = run(
        patient,
        say("[ANSWER] first"),
        say("[ANSWER] second"),
        click("check"),
        say("[EXIT]", "done"),
    )
    assert endings[:3] == [None, None, None]
    assert endings[3] == Ending("finished", "send_msg_to_user:[EXIT]", "second")


def test_exit_without_answer_takes_the_last_plain_message(agent: MolmoWebAgent) -> None:
    endings = run(agent, say("The price is $3.", "t1"), say("Still $3.", "t2"), say("[EXIT]"))
    assert endings == [None, None, Ending("finished", "send_msg_to_user:[EXIT]", "Still $3.")]


def test_exit_without_messages_takes_the_last_thought(agent: MolmoWebAgent) -> None:
    endings = run(
        agent, click("first thought"), click("the last thought"), click(""), say("[EXIT]")
    )
    assert endings[-1] == Ending("finished", "send_msg_to_user:[EXIT]", "the last thought")


def test_exit_with_nothing_said_has_no_answer(agent: MolmoWebAgent) -> None:
    assert run(agent, say("[EXIT]")) == [Ending("finished", "send_msg_to_user:[EXIT]", None)]


def test_an_empty_answer_is_an_answer(agent: MolmoWebAgent) -> None:
    assert run(agent, say("[ANSWER] ", "thinking"))[-1] == Ending(
        "finished", "send_msg_to_user:[ANSWER]", ""
    )


def test_answer_tag_inside_a_message_counts_as_the_benchmark_reads_it(tmp_path: Path) -> None:
    patient = make_agent("molmoweb", end_on_answer=False)
    assert isinstance(patient, MolmoWebAgent)
    # Not at the start: no end; but "[ANSWER]" in it makes it the answer, from character 9 on
    # (msg[9:], whatever comes before the tag), exactly as the benchmark reads trajectories.
    endings = run(patient, say("So: [ANSWER] 7"), say("[EXIT]"))
    assert endings == [None, Ending("finished", "send_msg_to_user:[EXIT]", "ER] 7")]


@pytest.mark.parametrize(
    "text",
    [
        say("Working on it."),
        json.dumps({"name": "report_infeasible", "infeasibility_reason": "blocked"}),
        json.dumps({"name": "keyboard_press", "key": "PageUp"}),
        json.dumps({"name": "zoom"}),
        click("no end"),
    ],
)
def test_other_steps_do_not_end_the_episode(agent: MolmoWebAgent, text: str) -> None:
    assert run(agent, text) == [None]


def test_parsed_actions_alone_are_enough_to_end(agent: MolmoWebAgent) -> None:
    # Replays may hand over a Parsed built elsewhere: its actions still say what was sent.
    exit_step = Parsed(thought="bye", actions=(Finish(answer=None),))
    answer_step = Parsed(thought="", actions=(Finish(answer="9"),))
    message_step = Parsed(actions=(CallUser(text="it is 9"),))
    assert agent.ending(answer_step, []) == Ending("finished", "send_msg_to_user:[ANSWER]", "9")
    shot = ImagePart(sha256="0" * 64)
    history = [PastStep(Observation(0, shot, ""), "", message_step)]
    assert agent.ending(exit_step, history) == Ending(
        "finished", "send_msg_to_user:[EXIT]", "it is 9"
    )
