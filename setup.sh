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
# Chromium's headless shell: headless recordings and replays start it about three times faster
# than the full browser (as Playwright's own headless default). Optional: without it they use
# chromium.
if [ ! -x /usr/lib/chromium/chromium-headless-shell ] && ! command -v chromium-headless-shell \
    >/dev/null 2>&1; then
    as_root=""
    [ "$(id -u)" -eq 0 ] || as_root="sudo"
    echo "setup: installing chromium-headless-shell with apt-get"
    { $as_root apt-get update -qq && DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq \
        chromium-headless-shell >/dev/null; } \
        || echo "setup: no chromium-headless-shell here; headless runs use chromium"
fi

# `ownloop serve-desktop` (the desktop tests use it): a virtual X display (xvfb), a window
# manager that maximizes every window (openbox), input events (xdotool), windows (wmctrl), the
# desktop's apps, a terminal and a text editor (xterm, mousepad; Chromium is above), git (a
# task sets a git setting), and the accessibility tree: a session bus (dbus-daemon), AT-SPI
# (at-spi2-core, libatk-adaptor for GTK apps) read by Debian's python3 (python3-pyatspi,
# gir1.2-atspi-2.0). Without recommends: they would pull in a whole desktop session.
desk=""
if [ "${1:-}" = "--test" ] || [ "${1:-}" = "--desktop" ]; then
    for package in xvfb openbox xdotool wmctrl xterm mousepad git dbus-daemon at-spi2-core \
        libatk-adaptor python3-pyatspi gir1.2-atspi-2.0; do
        dpkg -s "$package" >/dev/null 2>&1 || desk="$desk $package"
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
if [ "$extras" = "[test]" ]; then
    # The webarena-verified grader's tests: the package pins pydantic and jsonpath-ng older than
    # inspect_ai allows; the [test] extra brings its other requirements (see pyproject.toml).
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "webarena-verified>=1.2.3"
fi
echo "setup: ready (.venv/bin/ownloop)"
