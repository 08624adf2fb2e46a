#!/bin/sh
# Installs what ownloop needs on Debian: Chromium and a Python venv in .venv with ownloop in it.
#   ./setup.sh          the tool, recording included (pip install -e '.[record]')
#   ./setup.sh --test   the tool and its test dependencies (pip install -e '.[test]'), and the
#                       test desktop's programs (below)
#   ./setup.sh --desktop  the tool, and the programs `ownloop serve-desktop` runs a desktop with
# Only reading stores (sql, show, view, report, ...)? pip install . needs no Chromium.
set -eu
cd "$(dirname "$0")"
extras="[record]"
[ "${1:-}" = "--test" ] && extras="[test]"

need=""
command -v python3 >/dev/null 2>&1 || need="$need python3"
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || need="$need python3-venv"
[ -x /usr/lib/chromium/chromium ] || command -v chromium >/dev/null 2>&1 || need="$need chromium"
if [ -n "$need" ]; then
    as_root=""
    [ "$(id -u)" -eq 0 ] || as_root="sudo"
    echo "setup: installing$need with apt-get"
    $as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq $need >/dev/null
fi

# `ownloop serve-desktop` (the desktop tests use it): a virtual X display, a window manager that
# maximizes every window, xdotool for input events, wmctrl for windows, and the desktop's apps,
# a terminal and a text editor (Chromium is above). Without recommends: they pull in a session.
desk=""
if [ "${1:-}" = "--test" ] || [ "${1:-}" = "--desktop" ]; then
    for tool in Xvfb:xvfb openbox:openbox xdotool:xdotool wmctrl:wmctrl xterm:xterm \
        mousepad:mousepad; do
        command -v "${tool%%:*}" >/dev/null 2>&1 || desk="$desk ${tool#*:}"
    done
fi
if [ -n "$desk" ]; then
    as_root=""
    [ "$(id -u)" -eq 0 ] || as_root="sudo"
    echo "setup: installing$desk with apt-get"
    $as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends \
        $desk >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".$extras"
echo "setup: ready (.venv/bin/ownloop)"
