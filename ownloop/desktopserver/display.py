"""A real X desktop of the test server's own: Xvfb, openbox, applications, a HOME to throw away.

``Desktop.start()`` starts Xvfb on a display number it picks itself (``-displayfd``: no race with
another desktop on the same machine), openbox with a config of the server's (every window opens
maximized at 0,0 and takes the focus, so where things are on screen is known in advance), and the
``apps`` a fresh desktop runs. Everything the desktop starts carries ``OWNLOOP_DESKTOP=<id>`` in
its environment, so ``reset`` and ``stop`` find (and end) every process of this desktop, even
ones an application forked off, and no other.

The desktop's HOME is a folder in the server's temporary directory, never the user's. ``reset``
closes every application, wipes and recreates HOME and starts the fresh desktop's apps again;
``stop`` also ends openbox and Xvfb and removes the temporary directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from ownloop.desktopserver.atspi import AtspiReader
from ownloop.errors import OwnloopError

__all__ = [
    "APPS",
    "ATSPI_PYTHON",
    "HOME_FOLDERS",
    "Desktop",
    "DesktopError",
    "parse_size",
    "window_ids",
]

APPS: dict[str, list[str]] = {
    "xterm": ["xterm"],
    "mousepad": ["mousepad"],
    "chromium": ["chromium"],
}
"""What ``--apps`` can name, and the command each starts on a fresh desktop."""

HOME_FOLDERS = ("Desktop", "Documents", "Downloads")
"""Folders a fresh HOME has (as OSWorld's VM user has them)."""

# The desktop's programs are the system's (as on a VM), not those of the shell that started us.
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ATSPI_PYTHON = "/usr/bin/python3"  # Debian's, which has python3-pyatspi
_NEEDED = ("Xvfb", "openbox", "xdotool", "wmctrl")
_START_S = 15.0  # Xvfb and the window manager are up well within this, even on a busy machine

# Every window maximized and focused; a click focuses and raises. Nothing else is bound.
_OPENBOX_RC = """<?xml version="1.0" encoding="UTF-8"?>
<openbox_config xmlns="http://openbox.org/3.4/rc">
  <focus><focusNew>yes</focusNew><followMouse>no</followMouse></focus>
  <placement><policy>Smart</policy></placement>
  <desktops><number>1</number></desktops>
  <keyboard></keyboard>
  <mouse>
    <context name="Frame"><mousebind button="Left" action="Press">
      <action name="Focus"/><action name="Raise"/></mousebind></context>
    <context name="Client"><mousebind button="Left" action="Press">
      <action name="Focus"/><action name="Raise"/></mousebind>
      <mousebind button="Right" action="Press"><action name="Focus"/><action name="Raise"/>
      </mousebind></context>
    <context name="Titlebar"><mousebind button="Left" action="Press">
      <action name="Focus"/><action name="Raise"/></mousebind></context>
  </mouse>
  <applications>
    <application class="*"><decor>no</decor><maximized>yes</maximized><focus>yes</focus>
      <position force="yes"><x>0</x><y>0</y></position></application>
  </applications>
</openbox_config>
"""

# Chromium as this desktop runs it: no first-run UI, accessibility on, and (as root, where the
# sandbox cannot start) no sandbox. The tasks just say "chromium URL".
_CHROMIUM = """#!/bin/sh
extra=""
[ "$(id -u)" -eq 0 ] && extra="--no-sandbox"
exec {real} $extra --no-first-run --no-default-browser-check --disable-gpu \\
  --password-store=basic --force-renderer-accessibility --disable-dev-shm-usage \\
  --disable-extensions --disable-component-update --disable-background-networking \\
  --disable-sync --disable-default-apps --disable-features=Translate,MediaRouter \\
  --test-type "$@"
"""


class DesktopError(OwnloopError):
    pass


class Desktop:
    """One X desktop; ``start()`` it, ``reset()`` it between tasks, ``stop()`` it at the end.

    Args:
        size: the screen's (width, height).
        apps: names from ``APPS`` a fresh desktop runs (started on start and on each reset).
        display: an X display number to use; None picks a free one.
    """

    def __init__(
        self,
        size: tuple[int, int] = (1920, 1080),
        apps: Sequence[str] = (),
        display: int | None = None,
    ) -> None:
        unknown = [name for name in apps if name not in APPS]
        if unknown:
            raise DesktopError(f"no app {unknown[0]!r}: --apps takes {', '.join(APPS)}")
        self.size = size
        self.apps = tuple(apps)
        self.display = display
        self.id = uuid.uuid4().hex[:12]
        self.root = Path(tempfile.mkdtemp(prefix="ownloop-desktop-"))
        self.home = self.root / "home"
        self._xvfb: subprocess.Popen[bytes] | None = None
        self._wm: subprocess.Popen[bytes] | None = None
        self._launched: list[subprocess.Popen[bytes]] = []  # reaped when they end
        self._bus: tuple[str, int] | None = None  # the D-Bus session bus: address, pid
        self.atspi = False  # whether apps publish AT-SPI trees on that bus
        self._reader = AtspiReader(ATSPI_PYTHON)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start Xvfb, the window manager and the fresh desktop's apps.

        Raises:
            DesktopError: a program is missing (``./setup.sh`` installs them) or did not start.
        """
        missing = [name for name in _NEEDED if shutil.which(name) is None]
        if missing:
            raise DesktopError(
                f"serve-desktop needs {', '.join(missing)}: run ./setup.sh (apt-get install "
                "xvfb openbox xdotool wmctrl xterm mousepad)"
            )
        (self.root / "bin").mkdir()
        self._write_tools()
        try:
            self._start_xvfb()
            self._start_bus()
            self._fresh_home()
            self._start_wm()
            self._start_apps()
        except BaseException:
            self.stop()
            raise

    def reset(self) -> None:
        """Close every application, wipe and recreate HOME, start the fresh desktop's apps."""
        self._reader.close()
        self._end_processes(keep=self._infrastructure())
        self._close_left_windows()
        if self._wm is None or self._wm.poll() is not None:
            self._start_wm()
        self._fresh_home()
        self._start_apps()

    def stop(self) -> None:
        """End every process of this desktop (Xvfb last) and remove its folder; safe twice."""
        self._reader.close()
        self._end_processes(keep={self._pid(self._xvfb)})
        self._bus = None
        for process in (self._wm, self._xvfb):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=5)
        self._wm = self._xvfb = None
        self._end_processes(keep=set())
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ for the server

    @property
    def env(self) -> dict[str, str]:
        """The environment every program on this desktop runs with."""
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DBUS_", "WAYLAND_", "XDG_", "SESSION_MANAGER"))
            and key not in ("DISPLAY", "XAUTHORITY", "HOME", "PYTHONPATH", "VIRTUAL_ENV")
        }
        env.update(
            DISPLAY=f":{self.display}",
            XAUTHORITY=str(self.root / "Xauthority"),
            HOME=str(self.home),
            USER=env.get("USER", "user"),
            PATH=f"{self.root / 'bin'}:{_SYSTEM_PATH}",
            XDG_SESSION_TYPE="x11",
            XDG_RUNTIME_DIR=str(self.root / "run"),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            LANG=env.get("LANG", "C.UTF-8"),
            OWNLOOP_DESKTOP=self.id,
        )
        if self._bus is not None:
            env.update(DBUS_SESSION_BUS_ADDRESS=self._bus[0], ACCESSIBILITY_ENABLED="1")
        else:
            env.update(NO_AT_BRIDGE="1")  # no bus: GTK apps must not look for one
        return env

    def launch(self, argv: list[str] | str, shell: bool = False) -> subprocess.Popen[bytes]:
        """Start a program on the desktop without waiting for it (its output is dropped)."""
        self._launched = [process for process in self._launched if process.poll() is None]
        process = self._start(argv, shell, subprocess.DEVNULL)
        self._launched.append(process)
        return process

    def run(
        self, argv: list[str] | str, *, shell: bool, timeout: float
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a program on the desktop and wait for it, its output kept.

        Raises:
            subprocess.TimeoutExpired: it ran longer than ``timeout`` seconds (it is killed).
            OSError: it could not start.
        """
        with self._start(argv, shell, subprocess.PIPE) as process:
            try:
                stdout, stderr = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
        return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)

    def _start(self, argv: list[str] | str, shell: bool, output: int) -> subprocess.Popen[bytes]:
        """A program started as the desktop starts them all: its environment and home, no
        input, ``output`` for its stdout and stderr, and a session of its own."""
        return subprocess.Popen(
            argv,
            shell=shell,
            env=self.env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            start_new_session=True,
        )

    def accessibility(self, timeout_s: float = 30.0) -> str | None:
        """The apps' AT-SPI tree as XML; None without AT-SPI, or when it could not be read."""
        return self._reader.read(self.env, timeout_s) if self.atspi else None

    def processes(self) -> list[int]:
        """The ids of every live process this desktop started (Xvfb and openbox included): those
        whose environment carries the desktop's mark, those it launched, and their descendants
        (Chromium overwrites its environment with its title)."""
        marker = f"OWNLOOP_DESKTOP={self.id}".encode()
        found: list[int] = []
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            pid = int(entry.name)
            children.setdefault(int(stat.rsplit(")", 1)[-1].split()[1]), []).append(pid)
            if marker in environ.split(b"\0"):
                found.append(pid)
        for process in (self._xvfb, self._wm, *self._launched):
            if process is not None and process.poll() is None and process.pid not in found:
                found.append(process.pid)
        seen = set(found)
        for pid in found:  # grows while it runs: every descendant, once
            for child in children.get(pid, ()):
                if child not in seen:
                    seen.add(child)
                    found.append(child)
        return found

    # ------------------------------------------------------------------ the parts

    def _write_tools(self) -> None:
        (self.root / "Xauthority").write_bytes(b"")
        (self.root / "run").mkdir(mode=0o700)
        (self.root / "openbox.xml").write_text(_OPENBOX_RC, encoding="utf-8")
        real = shutil.which("chromium") or "/usr/bin/chromium"
        wrapper = self.root / "bin" / "chromium"
        wrapper.write_text(_CHROMIUM.format(real=real), encoding="utf-8")
        wrapper.chmod(0o755)
        python = shutil.which("python3", path=_SYSTEM_PATH)
        if python is not None and shutil.which("python", path=_SYSTEM_PATH) is None:
            (self.root / "bin" / "python").symlink_to(python)  # task files say "python"

    def _start_xvfb(self) -> None:
        width, height = self.size
        read, write = os.pipe()
        where = [f":{self.display}"] if self.display is not None else ["-displayfd", str(write)]
        env = {**os.environ, "OWNLOOP_DESKTOP": self.id}
        self._xvfb = subprocess.Popen(
            ["Xvfb", *where, "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp"]
            + ["-noreset", "-auth", str(self.root / "Xauthority")],
            env=env,
            pass_fds=(write,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(write)
        try:
            if self.display is None:
                self.display = _read_display(read, self._xvfb)
        finally:
            os.close(read)
        self._wait_for(lambda: Path(f"/tmp/.X11-unix/X{self.display}").exists(), "Xvfb")

    def _start_bus(self) -> None:
        """A D-Bus session bus of the desktop's own, when AT-SPI can be read (see
        ``atspi_tree.py``): apps publish their accessibility trees there."""
        if shutil.which("dbus-daemon") is None or not Path(ATSPI_PYTHON).exists():
            return
        probe = subprocess.run(
            [ATSPI_PYTHON, "-c", "import pyatspi"], capture_output=True, timeout=30, check=False
        )
        if probe.returncode != 0:
            return
        result = subprocess.run(
            ["dbus-daemon", "--session", "--fork", "--print-address=1", "--print-pid=1"],
            env=self.env,
            capture_output=True,
            timeout=30,
            check=False,
        )
        lines = result.stdout.decode().split()
        if result.returncode == 0 and len(lines) == 2 and lines[1].isdigit():
            self._bus = (lines[0], int(lines[1]))
            self.atspi = True

    @property
    def _bus_pid(self) -> int | None:
        return None if self._bus is None else self._bus[1]

    def _start_wm(self) -> None:
        self._wm = self.launch(["openbox", "--config-file", str(self.root / "openbox.xml")])
        self._wait_for(self._wm_ready, "openbox")

    def _wm_ready(self) -> bool:
        result = subprocess.run(["wmctrl", "-m"], env=self.env, capture_output=True, check=False)
        return result.returncode == 0 and b"Openbox" in result.stdout

    def _fresh_home(self) -> None:
        # Moved aside first, then checked: an app that was still dying may have written into
        # it (and made it again); its processes are ended once more and the move repeated.
        for _ in range(5):
            if self.home.exists():
                trash = self.root / f"old-home-{uuid.uuid4().hex[:8]}"
                self.home.rename(trash)
                shutil.rmtree(trash, ignore_errors=True)
            time.sleep(0.05)
            if not self.home.exists():
                break
            self._end_processes(keep=self._infrastructure())
        self.home.mkdir(exist_ok=True)
        for name in HOME_FOLDERS:
            (self.home / name).mkdir()

    def _start_apps(self) -> None:
        for name in self.apps:
            self.launch(APPS[name])
        if self.apps:
            self._wait_for(lambda: len(window_ids(self.env)) >= len(self.apps), "the apps")

    def _wait_for(self, ready: object, what: str) -> None:
        assert callable(ready)
        end = time.monotonic() + _START_S
        while not ready():
            if self._xvfb is not None and self._xvfb.poll() is not None:
                raise DesktopError(f"Xvfb exited (status {self._xvfb.returncode}) at start")
            if time.monotonic() > end:
                raise DesktopError(f"{what} did not start within {_START_S:g} s")
            time.sleep(0.05)

    def _end_processes(self, keep: set[int | None]) -> None:
        """SIGTERM every process of the desktop but ``keep``, then SIGKILL what is left, again
        while any is left (a browser may start a helper while it shuts down)."""
        rounds = [(signal.SIGTERM, 3.0)] + [(signal.SIGKILL, 2.0)] * 5
        for sig, grace in rounds:
            targets = [pid for pid in self.processes() if pid not in keep]
            if not targets:
                return
            for pid in targets:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            end = time.monotonic() + grace
            while time.monotonic() < end and any(_alive(pid) for pid in targets):
                time.sleep(0.05)
                for process in self._launched:
                    process.poll()  # reap what we started, so none lingers as a zombie
        self._launched = [process for process in self._launched if process.poll() is None]

    def _close_left_windows(self) -> None:
        """Cut the X connection of every window still shown (``xdotool windowkill``): a process
        that rewrote its environment, or one started without the desktop's mark, is not found
        by ``processes()``, but its windows must not outlive a reset."""
        end = time.monotonic() + _START_S
        while (left := window_ids(self.env)) and time.monotonic() < end:
            for window in left:
                subprocess.run(
                    ["xdotool", "windowkill", window],
                    env=self.env,
                    capture_output=True,
                    timeout=10,
                    check=False,
                )
            time.sleep(0.05)
        if left:
            raise DesktopError(f"{len(left)} windows stayed open through the reset")

    def _infrastructure(self) -> set[int | None]:
        """What a reset keeps running: Xvfb, the window manager, the session bus."""
        return {self._pid(self._xvfb), self._pid(self._wm), self._bus_pid}

    @staticmethod
    def _pid(process: subprocess.Popen[bytes] | None) -> int | None:
        return None if process is None else process.pid


def window_ids(env: dict[str, str]) -> list[str]:
    """The ids of the desktop's managed windows (``wmctrl -l``)."""
    result = subprocess.run(["wmctrl", "-l"], env=env, capture_output=True, timeout=10, check=False)
    return [line.split()[0] for line in result.stdout.decode(errors="replace").splitlines() if line]


def _read_display(fd: int, xvfb: subprocess.Popen[bytes]) -> int:
    """The display number Xvfb wrote to its -displayfd pipe."""
    import select

    data = b""
    end = time.monotonic() + _START_S
    while not data.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0 or xvfb.poll() is not None:
            raise DesktopError("Xvfb did not report a display number (is xvfb installed?)")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 64)
            if not chunk:
                raise DesktopError("Xvfb exited before it reported a display number")
            data += chunk
    return int(data.strip())


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return status.rsplit(")", 1)[-1].split()[0] != "Z"


def parse_size(text: str) -> tuple[int, int]:
    """``'1920x1080'`` as (1920, 1080).

    Raises:
        DesktopError: not WxH, or a side outside 64..7680.
    """
    width, _, height = text.lower().partition("x")
    if not (width.isdigit() and height.isdigit()):
        raise DesktopError(f"--size must be WxH, like 1920x1080, not {text[:40]!r}")
    size = int(width), int(height)
    if not all(64 <= side <= 7680 for side in size):
        raise DesktopError(f"--size sides must be 64..7680 pixels, not {text[:40]!r}")
    return size
