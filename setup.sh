#!/bin/sh
# Installs what ownloop needs on Debian: Chromium and a Python venv in .venv with ownloop in it.
#   ./setup.sh          the tool, recording included (pip install -e '.[record]')
#   ./setup.sh --test   the tool and its test dependencies (pip install -e '.[test]')
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

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".$extras"
if [ "$extras" = "[test]" ]; then
    # The webarena-verified grader's tests: the package pins pydantic and jsonpath-ng older than
    # inspect_ai allows; the [test] extra brings its other requirements (see pyproject.toml).
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "webarena-verified>=1.2.3"
fi
echo "setup: ready (.venv/bin/ownloop)"
