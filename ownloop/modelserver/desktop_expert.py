"""The desktop expert: answers the test desktop suite's tasks like a competent model would.

``serve-model --expert desktop --agent uitars|opencua`` answers each step of the tasks of
``tests/desktop/osworld`` (OSWorld's task format, run on ``ownloop serve-desktop``) in the
agent's own grammar, rendered by the agent itself (``agent.render``).

How it decides:

- **Which task.** The request's text holds the task's instruction (every agent states it in its
  prompt); the expert knows each suite task's instruction word for word (``TASKS``) and picks
  the one found. A request holding none is answered 400.
- **Where.** The test desktop is deterministic: its window manager opens every window
  maximized at (0, 0) with the focus, and each task's setup opens the one window the task is
  about (the terminal, the editor with the document, the browser with the page, whose input
  field fills it). So the middle of the screen is always inside the window that matters, and a
  click there focuses its text area. Points are fractions of the screen, turned into pixels of
  the request's last screenshot (its size read from the image header), so any screen size works.
- **What next.** Step k of a session (k = steps already taken, ``chat.steps_taken``) is answered
  with the plan's k-th step; past the end, the last step (the ending) again. The expert does not
  read the screenshot's pixels or the accessibility tree: it plans from the instruction alone,
  as a scripted test partner of a deterministic desktop.
- **Endings.** A done task ends with the agent's finish (UI-TARS ``finished(content='')``,
  OpenCUA ``computer.terminate(status='success')``); an infeasible one (``func: "infeasible"``)
  with the agent's own way of giving up: OpenCUA ``computer.terminate(status='failure')``
  (OSWorld's FAIL), UI-TARS ``call_user()`` (its OSWorld loop turns a call to the user into
  FAIL; UI-TARS has no fail action of its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ownloop.modelserver.chat import BadRequest, Reply, last_image_size, request_text, steps_taken
from ownloop.store.events import Action, CallUser, Click, Fail, Finish, Hotkey, TypeText

__all__ = [
    "DESKTOP_AGENTS",
    "TASKS",
    "DesktopExpert",
    "DesktopTask",
    "Step",
    "find_desktop_task",
]

DESKTOP_AGENTS = ("uitars", "opencua")


class Step(NamedTuple):
    """One planned step: a thought and actions, clicks given as fractions of the screen."""

    thought: str
    actions: tuple[Action, ...]


class DesktopTask(NamedTuple):
    id: str
    instruction: str
    steps: tuple[Step, ...]
    infeasible: bool = False


def _click_middle(what: str) -> Step:
    return Step(
        f"The {what} fills the screen. I click into it to give it the keyboard.",
        (Click(x=0.5, y=0.5),),
    )


def _type(thought: str, text: str) -> Step:
    return Step(thought, (TypeText(text=text),))


_DONE = Step("The task is done.", (Finish(answer=None),))

TASKS: tuple[DesktopTask, ...] = (
    DesktopTask(
        "term-create-file",
        "In the open terminal, create a file named greeting.txt in the home folder that "
        "contains exactly one line: hello from the desktop",
        (
            _click_middle("terminal"),
            _type(
                "I write the line into the file with echo.",
                "echo 'hello from the desktop' > ~/greeting.txt\n",
            ),
            _DONE,
        ),
    ),
    DesktopTask(
        "term-count-lines",
        "Using the terminal, write the number of lines of ~/Documents/fruits.csv into a new "
        "file ~/Documents/count.txt (the number only).",
        (
            _click_middle("terminal"),
            _type(
                "wc -l reading from standard input prints the number alone.",
                "wc -l < ~/Documents/fruits.csv > ~/Documents/count.txt\n",
            ),
            _DONE,
        ),
    ),
    DesktopTask(
        "term-git-name",
        "Using the terminal, set the global git user name of this account to Ada Lovelace.",
        (
            _click_middle("terminal"),
            _type(
                "git config --global sets it for the account.",
                "git config --global user.name 'Ada Lovelace'\n",
            ),
            _DONE,
        ),
    ),
    DesktopTask(
        "editor-replace-text",
        "In the text editor, replace the whole text of todo.txt with the words: call the "
        "plumber. Then save the file.",
        (
            _click_middle("editor"),
            Step("I select all the text first.", (Hotkey(keys=("ctrl", "a")),)),
            _type("Typing replaces the selection.", "call the plumber"),
            Step("Now I save with Ctrl+S.", (Hotkey(keys=("ctrl", "s")),)),
            _DONE,
        ),
    ),
    DesktopTask(
        "chrome-sign-up",
        "In the browser, type the name Ada into the sign-up field and press Enter.",
        (
            _click_middle("sign-up field"),
            _type("I type the name and press Enter.", "Ada\n"),
            _DONE,
        ),
    ),
    DesktopTask(
        "infeasible-photoshop",
        "Open Adobe Photoshop on this computer and make a new 800x600 canvas in it.",
        (
            Step(
                "Adobe Photoshop does not run on this Linux desktop and is not installed: "
                "the task cannot be done.",
                (Fail(reason="Adobe Photoshop is not available on this Linux desktop"),),
            ),
        ),
        infeasible=True,
    ),
)


def find_desktop_task(request: dict[str, Any]) -> DesktopTask | None:
    """The suite task whose instruction the request's text holds (the longest such one)."""
    text = request_text(request)
    found = [task for task in TASKS if task.instruction in text]
    return max(found, key=lambda task: len(task.instruction)) if found else None


class DesktopExpert:
    """A responder that does the desktop suite's tasks in ``agent``'s output grammar.

    Args:
        agent: ``uitars`` or ``opencua`` (the two desktop agents).
    """

    def __init__(self, agent: str) -> None:
        from ownloop.agents import make_agent

        if agent not in DESKTOP_AGENTS:
            raise ValueError(
                f"the desktop expert answers as {' or '.join(DESKTOP_AGENTS)}, not {agent!r}"
            )
        self.name = agent
        self.agent = make_agent(agent)

    def __call__(self, request: dict[str, Any]) -> Reply:
        task = find_desktop_task(request)
        if task is None:
            raise BadRequest(
                "no desktop suite task in the request: the desktop expert knows the "
                "instructions of tests/desktop/osworld only",
            )
        size = last_image_size(request)
        if size is None:
            raise BadRequest("the request has no PNG screenshot")
        step = task.steps[min(steps_taken(request), len(task.steps) - 1)]
        actions = self._for_agent(step.actions, size)
        return Reply(self.agent.render(step.thought, actions, size))

    def _for_agent(self, actions: Sequence[Action], size: tuple[int, int]) -> list[Action]:
        """The step's actions in pixels of the screenshot, in what the agent can say."""
        width, height = size
        out: list[Action] = []
        for action in actions:
            if isinstance(action, Click):
                action = Click(x=round(action.x * width), y=round(action.y * height))
            elif isinstance(action, Fail) and self.name == "uitars":
                action = CallUser(text=action.reason)
            out.append(action)
        return out
