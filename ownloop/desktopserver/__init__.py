"""``ownloop serve-desktop``: a test desktop that speaks OSWorld's in-VM server protocol.

A real X display (Xvfb), a window manager (openbox) and real applications (xterm, mousepad,
Chromium), served over HTTP on 127.0.0.1 as an OSWorld VM's server serves its guest, so the
desktop world can be recorded, graded and replayed in tests without a VM. pyautogui code sent to
``/execute`` is read by ownloop's whitelist interpreter and performed as X input events; it is
never run as Python. See ``docs/desktop.md`` (or ``docs/pending-dserver.md``).
"""

from ownloop.desktopserver.display import APPS, Desktop, DesktopError
from ownloop.desktopserver.server import DesktopServer

__all__ = ["APPS", "Desktop", "DesktopError", "DesktopServer"]
