#!/usr/bin/env bash
# Make a headless browser available for tests/browser.rs: install Debian's
# chromium when no chromium is on PATH, then print
#
#   INFERGATE_CHROMIUM=<path>
#
# as a KEY=VALUE line a script can source. Idempotent. Exit status 1 (the
# reason on stderr) when none can be installed: the browser test then fails
# and says so, it never passes without a browser.
set -euo pipefail

say() { printf 'setup-chromium: %s\n' "$*" >&2; }
die() {
    printf 'setup-chromium: error: %s\n' "$*" >&2
    exit 1
}

find_chromium() {
    local c
    for c in chromium chromium-browser; do
        if command -v "$c" >/dev/null; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}

as_root=()
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || die "chromium is not installed, and installing it needs root or sudo"
    as_root=(sudo -n)
fi

if ! bin=$(find_chromium); then
    command -v apt-get >/dev/null || die "chromium is not installed and there is no apt-get to install it"
    say "installing Debian's chromium (headless use only)"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 ||
        die "apt-get update failed (root or passwordless sudo needed)"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2 ||
        die "apt-get install chromium failed"
    bin=$(find_chromium) || die "no chromium on PATH after installing it"
fi
printf 'INFERGATE_CHROMIUM=%s\n' "$bin"
