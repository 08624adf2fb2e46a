"""``ownloop serve-desktop`` and ``serve-model --expert desktop`` as a user runs them."""

from __future__ import annotations

import base64
import io
import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from ownloop.cli import cli
from ownloop.modelserver.desktop_expert import TASKS
from ownloop.modelserver.endpoint import UnknownExpert, make_responder, make_server


@pytest.mark.desktop
def test_serve_desktop_prints_its_url_serves_and_stops_cleanly_on_sigterm() -> None:
    process = subprocess.Popen(
        [sys.executable, "-W", "error", "-c", "from ownloop.cli import main; main()"]
        + ["serve-desktop", "--size", "320x200", "--apps", "xterm", "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("ownloop serve-desktop: 320x200 desktop at http://127.0.0.1:")
        url = first.rsplit(" at ", 1)[1].strip()
        request = urllib.request.Request(url + "/screen_size", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.loads(response.read()) == {"width": 320, "height": 200}
        command = json.dumps({"command": "wmctrl -lp", "shell": True}).encode()
        with urllib.request.urlopen(url + "/execute", data=command, timeout=30) as response:
            pid = int(json.loads(response.read())["output"].split()[2])  # the fresh xterm's
        reset = CliRunner().invoke(cli, ["serve-desktop", "--reset", url])
        assert reset.exit_code == 0 and reset.output.startswith(
            f"ownloop serve-desktop: {url} reset in "
        )
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        errors = process.stderr.read() if process.stderr else ""
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    assert code == 0, errors
    assert not Path(f"/proc/{pid}").exists()


def test_serve_desktop_refuses_bad_options_in_one_line() -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["serve-desktop", "--apps", "xterm,gimp"])
    assert result.exit_code == 1
    assert result.output == "Error: no app 'gimp': --apps takes xterm, mousepad, chromium\n"
    result = runner.invoke(cli, ["serve-desktop", "--size", "big"])
    assert result.output == "Error: --size must be WxH, like 1920x1080, not 'big'\n"
    result = runner.invoke(cli, ["serve-desktop", "--reset", "http://127.0.0.1:1"])
    assert result.output.startswith("Error: no test desktop answered at http://127.0.0.1:1 (")
    assert result.output.endswith("; start one with: ownloop serve-desktop\n")
    # (serve-model's CLI loads the cassette machinery and openai first: the same check, cheaper)
    with pytest.raises(UnknownExpert, match="^the desktop expert answers as uitars or opencua, "):
        make_responder("desktop", "fara7b")


def _png(size: tuple[int, int]) -> str:
    out = io.BytesIO()
    Image.new("RGB", size, "black").save(out, "PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def test_serve_model_desktop_expert_answers_over_http() -> None:
    server = make_server("desktop", "uitars")
    url = server.start()
    try:
        task = TASKS[0]
        body = {
            "model": "ownloop-desktop-uitars",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": f"Instruction: {task.instruction}"},
                        {"type": "image_url", "image_url": {"url": _png((1920, 1080))}},
                    ],
                }
            ],
        }
        request = urllib.request.Request(
            url + "/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())["choices"][0]["message"]["content"]
        # the middle of 1920x1080, in UI-TARS's smart_resize space (1932x1092)
        assert answer.endswith("Action: click(start_box='(966,546)')")
        body["messages"][0]["content"][0]["text"] = "Instruction: do something else"
        request = urllib.request.Request(
            url + "/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        refused.value.close()  # the refusal's response holds the connection
        assert refused.value.code == 400
    finally:
        server.stop()
