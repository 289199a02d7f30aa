#!/usr/bin/env bash
# An OCI distribution registry on loopback for the registry tests
# (tests/registry.rs), owned by this test run: Debian's `docker-registry`
# (the CNCF distribution registry), installed when missing, started with
# `docker-registry serve CONFIG` (no systemd) on a free 127.0.0.1 port with
# its storage in a new temporary directory, no auth. Prints, on stdout, what
# the tests read:
#
#   INFERGATE_TEST_REGISTRY=127.0.0.1:PORT
#   INFERGATE_TEST_REGISTRY_DIR=DIR
#
# `scripts/setup-registry.sh --stop DIR` stops that registry and removes DIR.
# Diagnostics go to stderr.
set -euo pipefail

if [ "${1:-}" = "--stop" ]; then
    dir=${2:?usage: setup-registry.sh --stop DIR}
    if [ -s "$dir/pid" ]; then
        kill "$(cat "$dir/pid")" 2>/dev/null || true
    fi
    rm -rf "$dir"
    exit 0
fi

if ! command -v docker-registry >/dev/null; then
    echo "setup-registry: installing Debian's docker-registry" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq docker-registry; } >&2
fi

dir=$(mktemp -d /tmp/infergate-registry.XXXXXX)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$dir/config.yml" <<CONFIG
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
CONFIG
# setsid: the registry outlives this script, in a process group of its own.
setsid docker-registry serve "$dir/config.yml" >"$dir/server.log" 2>&1 </dev/null &
echo $! >"$dir/pid"
for _ in $(seq 1 100); do
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' \
        "http://127.0.0.1:$port/v2/" 2>/dev/null; then
        echo "INFERGATE_TEST_REGISTRY=127.0.0.1:$port"
        echo "INFERGATE_TEST_REGISTRY_DIR=$dir"
        exit 0
    fi
    sleep 0.1
done
echo "setup-registry: the registry did not answer on 127.0.0.1:$port; its log:" >&2
cat "$dir/server.log" >&2
exit 1
