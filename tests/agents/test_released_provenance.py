"""Issue 31: a released text says exactly where it came from: the clone's commit (read from its
.git, git never run by ownloop) and the sha256 of every file read, as RunStarted records them."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ownloop.agents import make_agent, released_texts
from ownloop.agents.base import Observation
from ownloop.agents.released import checkout_commit, released_commit, released_sha256
from ownloop.store.events import ImagePart, RunStarted, Task, TextPart

FARA_CLONE = Path(__file__).parent / "fara_clone"

_PROMPTS = '''
S2_SYSTEM_PROMPT = """# Tools\\n<tools>\\n{tools_xml}\\n</tools>\\nUse {{"name": ...}}."""
S2_DESCRIPTION_PROMPT_TEMPLATE = """Drive the computer.\\n{resolution_info}"""
S2_ACTION_DESCRIPTION_BASE = """* `left_click`: click."""
'''


_AGENT = '''
import json


class Qwen3VLAgent:
    def predict(self, instruction, obs):
        previous_actions_str = "None"
        description_prompt_lines = [
            "Drive the desktop.",
            f"* Size {self.w}." if self.mode == "absolute" else "* Size 1000x1000.",
            "* Aim well.",
        ]
        description_prompt = "\\n".join(description_prompt_lines)
        action_description_prompt = """
* `left_click`: press it.
"""
        tools_def = {"description": description_prompt}
        system_prompt = """# Tools (released)
<tools>
""" + json.dumps(tools_def) + """
</tools>
Answer with Action: then the call."""
        instruction_prompt = f"""
Next move, please.

Instruction: {instruction}

Previous actions:
{previous_actions_str}"""
        return system_prompt, instruction_prompt
'''


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "OSWorld"
    (root / "mm_agents" / "evocua").mkdir(parents=True)
    (root / "mm_agents" / "evocua" / "prompts.py").write_text(_PROMPTS, encoding="utf-8")
    (root / "mm_agents" / "qwen3vl_agent.py").write_text(_AGENT, encoding="utf-8")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "prompts")
    return root


def test_the_commit_and_each_files_sha256_are_recorded(clone: Path) -> None:
    texts = released_texts("qwen3vl", str(clone))
    assert texts is not None
    evocua = (clone / "mm_agents" / "evocua" / "prompts.py").resolve()
    agent_file = (clone / "mm_agents" / "qwen3vl_agent.py").resolve()
    assert texts.commit == _git(clone, "rev-parse", "HEAD")
    assert dict(texts.sha256) == {
        str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path in (agent_file, evocua)
    }
    agent = make_agent("qwen3vl", released=texts, prompt="evocua")
    assert released_commit(agent) == texts.commit
    assert released_sha256(agent) == dict(texts.sha256)
    # the EvoCUA text is the clone's, with the screen stated in its frame
    system = agent.system_message((1280, 720))  # type: ignore[attr-defined]
    assert system.startswith("# Tools") and "Drive the computer." in system
    assert "* The screen's resolution is 1000x1000." in system and '{"name": ...}' in system
    # packed refs and a detached HEAD are read too
    _git(clone, "pack-refs", "--all")
    assert checkout_commit(evocua) == texts.commit
    _git(clone, "checkout", "-q", "--detach")
    assert checkout_commit(evocua) == texts.commit


def test_qwen3vls_texts_are_read_from_its_predict_never_run(clone: Path) -> None:
    texts = released_texts("qwen3vl", str(clone))
    agent = make_agent("qwen3vl", released=texts)
    assert agent.prompt_source.startswith("released:") and "qwen3vl_agent.py" in agent.prompt_source
    system = agent.system_message((1280, 720))  # type: ignore[attr-defined]
    assert system.startswith("# Tools (released)\n<tools>\n{")
    assert system.endswith("</tools>\nAnswer with Action: then the call.")
    tool = json.loads(system.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0])["function"]
    assert tool["description"] == (
        "Drive the desktop.\n* The screen's resolution is 1000x1000.\n* Aim well."
    )
    assert tool["parameters"]["properties"]["action"]["description"] == (
        "\n* `left_click`: press it.\n"
    )
    task = Task(task_id="t", prompt="Click OK.", start_url="http://127.0.0.1:1/")
    now = Observation(0, ImagePart(sha256="0" * 64, width=1280, height=720), "http://x/")
    (_, user) = agent.build_messages(task, (), now)
    text = user.parts[1]
    assert isinstance(text, TextPart)
    assert text.text.startswith("\nNext move, please.\n\nInstruction: You are interacting")
    assert text.text.endswith("Previous actions:\nNone")
    # without the file: ownloop's own wording, and nothing recorded
    own = make_agent("qwen3vl")
    assert (own.prompt_source, released_commit(own), released_sha256(own)) == ("built-in", "", {})


def test_a_folder_that_is_no_checkout_has_no_commit_and_old_events_decode(tmp_path: Path) -> None:
    texts = released_texts("fara7b", str(FARA_CLONE))
    assert texts is not None and len(texts.sha256) == 2
    assert all(len(digest) == 64 for _, digest in texts.sha256)
    assert checkout_commit(tmp_path) == ""
    started = RunStarted(at=0.0, run_id="r")  # type: ignore[arg-type]
    assert (started.released_commit, started.released_sha256) == ("", {})
