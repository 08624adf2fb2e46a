"""``ownloop serve-desktop`` on a real X display with real apps: input events really change the
screen and the files, hostile code never runs, a reset really cleans, and nothing is left running
after shutdown. The tests share the session's desktop (``tests/desktop/fixtures.py``)."""

from __future__ import annotations

import json
import os
import string
import subprocess
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from ownloop.desktopserver import Desktop, DesktopServer
from ownloop.desktopserver.display import parse_size
from ownloop.desktopserver.keysyms import keysym
from ownloop.desktopserver.operations import pyautogui_code
from ownloop.errors import OwnloopError
from ownloop.testing.processes import running
from tests.desktop.fixtures import TestDesktop

PRELUDE = "import pyautogui; import time; pyautogui.FAILSAFE = False; "


# ---------------------------------------------------------------------- no display needed


def test_only_python_c_code_that_imports_pyautogui_goes_to_the_interpreter() -> None:
    assert pyautogui_code(["python", "-c", PRELUDE + "pyautogui.click(1, 2)"]) == (
        "pyautogui.click(1, 2)"
    )
    assert pyautogui_code(f"python -c \"{PRELUDE}pyautogui.press('a')\"") == "pyautogui.press('a')"
    # Without the prelude the whole code is the interpreter's to judge (and it refuses os).
    assert pyautogui_code(["python3", "-c", "import os; import pyautogui"]) == (
        "import os; import pyautogui"
    )
    assert pyautogui_code(["python", "-c", "print(1)"]) is None  # a task's own setup command
    assert pyautogui_code("ls -l") is None
    assert pyautogui_code({"not": "a command"}) is None


def test_key_names_map_to_x_keysyms() -> None:
    assert [keysym(k) for k in ("enter", "ctrl", "Shift", "pagedown", "a", "+", "f5")] == [
        "Return",
        "Control_L",
        "Shift_L",
        "Next",
        "a",
        "plus",
        "F5",
    ]
    assert all(keysym(c) for c in string.punctuation + string.ascii_letters + string.digits)
    with pytest.raises(ValueError, match="unknown key"):
        keysym("hyperdrive")


def test_size_is_checked() -> None:
    assert parse_size("1920x1080") == (1920, 1080)
    for bad in ("1920", "0x0", "axb", "99999x10"):
        with pytest.raises(OwnloopError, match="--size"):
            parse_size(bad)


# ---------------------------------------------------------------------- the shared desktop


def _launch(desktop: TestDesktop, command: list[str], title: str) -> None:
    desktop.post("/setup/launch", {"command": command})
    desktop.wait_for(lambda: title in desktop.titles(), f"a window titled {title!r}")


@pytest.mark.desktop
def test_typing_into_xterm_runs_the_command_and_changes_the_screen(desktop: TestDesktop) -> None:
    _launch(desktop, ["xterm", "-T", "term"], " term")
    before = desktop.get("/screenshot")
    assert before.startswith(b"\x89PNG")
    answer = desktop.pyautogui(
        "pyautogui.click(640, 360); pyautogui.typewrite('echo typed-$((6*7)) > ~/out.txt\\n')"
    )
    assert answer == {"status": "success", "output": "", "error": "", "returncode": 0}
    out = desktop.home / "out.txt"
    desktop.wait_for(out.exists, "xterm ran the typed command")
    desktop.wait_for(lambda: out.read_text() == "typed-42\n", "the command's output")
    assert desktop.get("/screenshot") != before
    assert json.loads(desktop.get("/cursor_position")) == [640, 360]
    # xterm publishes no AT-SPI tree: the window manager's view of it is added
    assert '<application name="term" class="xterm.XTerm" pid="' in desktop.windows()


@pytest.mark.desktop
def test_the_editor_saves_what_was_typed_literally(desktop: TestDesktop) -> None:
    (desktop.home / "notes.txt").write_text("draft\n")
    assert "opened" in desktop.post("/setup/open_file", {"path": "~/notes.txt"})
    tree = desktop.windows()  # AT-SPI's: the editor's own widgets, its buffer as text
    assert '<application name="mousepad" pid="' in tree
    assert 'text="draft&#10;"' in tree
    hostile = "$(touch ~/pwned); `id`; rm -rf ~ # '\" \\\\ |&"
    code = f"pyautogui.click(640, 360); pyautogui.hotkey('ctrl', 'a'); pyautogui.write({hostile!r})"
    assert desktop.pyautogui(code + "; pyautogui.hotkey('ctrl', 's')")["returncode"] == 0
    saved = desktop.home / "notes.txt"
    desktop.wait_for(lambda: saved.read_text() == hostile, "the editor saved the typed text")
    served = urllib.request.urlopen(
        urllib.request.Request(desktop.url + "/file", data=b"file_path=%7E%2Fnotes.txt"), timeout=30
    ).read()
    assert served == hostile.encode()
    assert not (desktop.home / "pwned").exists()


HOSTILE = [
    "import os; os.system('touch {marker}')",
    "__import__('os').system('touch {marker}')",
    "pyautogui.click(1, 1); exec(\"open('{marker}', 'w')\")",
    "pyautogui.typewrite(open('{marker}', 'w').name)",
    "for i in range(10**9): pyautogui.press('a')",
    "for i in range(100000): pyautogui.press('a')",
    "pyautogui.click(99377, -39)",
    "pyautogui.write('x' * 10000)",
    "computer.terminate(status='success')",
    "pyautogui.click(x=640, y=360)\nimport subprocess; subprocess.run(['touch', '{marker}'])",
]


@pytest.mark.desktop
def test_hostile_code_is_refused_whole_and_never_runs(desktop: TestDesktop) -> None:
    marker = Path("/tmp") / f"ownloop-pwned-{uuid.uuid4().hex}"
    before = desktop.get("/cursor_position")
    for template in HOSTILE:
        code = template.format(marker=marker)
        answer = desktop.pyautogui(code)
        assert answer["returncode"] != 0, code
        assert answer["error"].startswith("refused: "), answer
    assert not marker.exists()
    assert desktop.get("/cursor_position") == before  # not even the first click was performed


@pytest.mark.desktop
def test_reset_closes_every_app_and_wipes_home(desktop: TestDesktop) -> None:
    _launch(desktop, ["xterm", "-T", "left-over"], "left-over")
    forked = desktop.shell("sleep 300 > /dev/null 2>&1 & echo $!")
    pid = int(forked["output"])
    (desktop.home / "Desktop" / "left.txt").write_text("x")
    answer = desktop.post("/reset")
    assert answer["status"] == "success"
    assert "left-over" not in desktop.titles()
    assert not running(pid)
    assert sorted(os.listdir(desktop.home)) == ["Desktop", "Documents", "Downloads"]
    assert os.listdir(desktop.home / "Desktop") == []


@pytest.mark.desktop
def test_reset_closes_a_window_whose_process_it_cannot_find(
    desktop: TestDesktop, desktop_server: Any
) -> None:
    """A window's process without the desktop's mark (one that rewrote its environment, as
    Chromium's helpers do, or one started from outside) still loses its window at a reset."""
    env = {k: v for k, v in desktop_server.desktop.env.items() if k != "OWNLOOP_DESKTOP"}
    stranger = subprocess.Popen(
        ["xterm", "-T", "stranger"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        desktop.wait_for(lambda: "stranger" in desktop.titles(), "a window titled 'stranger'")
        assert desktop.post("/reset")["status"] == "success"
        assert "stranger" not in desktop.titles()
        assert stranger.wait(timeout=10) != 0  # its X connection was cut
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.desktop
def test_the_other_endpoints(desktop: TestDesktop) -> None:
    assert desktop.post("/screen_size") == {"width": 1280, "height": 720}
    assert desktop.get("/platform") == b"Linux"
    boundary = "b0undary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file_path"\r\n\r\n'
            f"~/Documents/up.bin\r\n--{boundary}\r\nContent-Disposition: form-data; "
            f'name="file_data"; filename="up.bin"\r\n\r\n'
        ).encode()
        + b"\x00\x01bytes\r\n"
        + f"--{boundary}--\r\n".encode()
    )
    urllib.request.urlopen(
        urllib.request.Request(
            desktop.url + "/setup/upload",
            data=body,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        ),
        timeout=30,
    ).read()
    assert (desktop.home / "Documents" / "up.bin").read_bytes() == b"\x00\x01bytes"
    tree = desktop.post("/list_directory", {"path": "/home/user/Documents"})
    assert tree["directory_tree"]["children"] == [{"type": "file", "name": "up.bin"}]
    shell = desktop.shell("echo $HOME; exit 3")
    assert (shell["output"], shell["returncode"]) == (f"{desktop.home}\n", 3)
    with pytest.raises(urllib.error.HTTPError) as refused:
        desktop.post("/setup/download_file", {"url": "http://example.com/x", "path": "~/x"})
    assert refused.value.code == 400
    refused.value.close()  # an HTTPError holds its response's socket
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(
            urllib.request.Request(desktop.url + "/file", data=b"file_path=/nonexistent"),
            timeout=30,
        )
    assert missing.value.code == 404
    missing.value.close()


@pytest.mark.desktop
def test_nothing_is_left_running_after_shutdown() -> None:
    server = DesktopServer(Desktop((320, 240), ["xterm"]))
    server.start()
    desktop = server.desktop
    display, root = desktop.display, desktop.root
    started = desktop.processes()
    assert len(started) >= 3  # Xvfb, openbox, xterm
    server.close()
    assert desktop.processes() == []
    assert [pid for pid in started if running(pid)] == []
    assert not Path(f"/tmp/.X11-unix/X{display}").exists()
    assert not root.exists()
