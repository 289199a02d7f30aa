#!/usr/bin/env bash
# junitparser (PyPI) in a cached venv, for tests that read infergate's JUnit
# output back with a real consumer. Prints the venv's python last.
#
#   INFERGATE_CACHE   cache root (default ~/.cache/infergate)
#   INFERGATE_PYTHON  Python >= 3.9 used to create the venv (default python3)
set -euo pipefail

VERSION=5.0.3
CACHE="${INFERGATE_CACHE:-$HOME/.cache/infergate}"
PYTHON="${INFERGATE_PYTHON:-python3}"
VENV="$CACHE/tools/junitparser-$VERSION/venv"

mkdir -p "$CACHE/tools"
exec 9>"$CACHE/.junitparser.lock"
flock 9
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import junitparser' 2>/dev/null; then
    printf 'setup-junitparser: installing junitparser==%s into %s\n' "$VERSION" "$VENV" >&2
    rm -rf "$VENV"
    if "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
        "$PYTHON" -m venv "$VENV"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "junitparser==$VERSION"
    else
        # Debian's python3 without python3-venv: a pip-less venv, filled by the system pip.
        "$PYTHON" -m venv --without-pip "$VENV"
        "$PYTHON" -m pip --python "$VENV/bin/python" install --quiet --disable-pip-version-check --no-input "junitparser==$VERSION"
    fi
fi
echo "$VENV/bin/python"
