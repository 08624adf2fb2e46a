"""``ownloop serve-model`` as a user runs it: a real process, a real port, Ctrl-C to stop."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import openai
import pytest
from click.testing import CliRunner

from ownloop.cli import cli

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.slow
def test_serve_model_prints_its_url_serves_faults_then_the_expert_and_stops(client, stop):
    process = subprocess.Popen(
        [
            sys.executable,
            "-W",
            "error",
            "-c",
            "from ownloop.cli import main; main()",
            "serve-model",
            "--port",
            "0",
            "--expert",
            "miniwob",
            "--agent",
            "uitars",
            "--faults",
            "500:1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = process.stdout.readline()
        assert first.startswith(
            "ownloop serve-model: miniwob expert for uitars at http://127.0.0.1:"
        )
        url = first.split(" at ", 1)[1].strip()
        assert url.endswith("/v1")
        api = client(url)
        assert [m.id for m in api.models.list().data] == ["ownloop-miniwob-uitars"]
        with pytest.raises(openai.InternalServerError):
            api.chat.completions.create(model="m", messages=MESSAGES)
        # The fault is used up: the expert answers, and a request without a task is a 400.
        with pytest.raises(openai.BadRequestError, match="no task in the request"):
            api.chat.completions.create(model="m", messages=MESSAGES)
        assert "call 1 -> HTTP 500" in process.stdout.readline()
    finally:
        process.send_signal(stop)
        started = time.monotonic()
        code = process.wait(timeout=20)
        errors = process.stderr.read()
        process.stdout.close()  # else an unclosed-pipe ResourceWarning
        process.stderr.close()
    assert code == 0, errors
    assert time.monotonic() - started < 10
    assert "Traceback" not in errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--faults", "boom:2"], "Error: bad fault phase 'boom:2'. Use MODE[=ARG][:N]"),
        (["--expert", "webshop"], "Error: no expert 'webshop'. Use one of: miniwob"),
        (["--agent", "nobody"], "Error: unknown agent 'nobody'. Choose one of:"),
    ],
)
def test_serve_model_bad_options_are_one_line_errors(args, message):
    result = CliRunner().invoke(cli, ["serve-model", "--port", "0", *args])
    assert result.exit_code == 1
    assert result.output.startswith(message)
    assert "Traceback" not in result.output
