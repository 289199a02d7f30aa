#!/usr/bin/env bash
# Make a Docker daemon available for tests/container.rs: install Debian's
# docker.io when dockerd is missing, start dockerd in the background when no
# daemon answers on the socket, wait for the socket, and print
#
#   DOCKER_HOST=unix:///var/run/docker.sock
#   INFERGATE_DOCKERD_PID=<pid>      (only when this script started dockerd)
#
# as KEY=VALUE lines a script can source. Idempotent: a running daemon is
# left alone. Containers here only ever use host networking, so dockerd is
# started without its default bridge (--bridge=none) and without touching
# iptables: nothing on the host's network changes.
#
# Exit status: 0 when a daemon answers; 1 when none could be installed or
# started (the reason is on stderr) — the container test then reports that
# no daemon can run instead of passing.
#
# Environment:
#   INFERGATE_DOCKER_SOCK  socket path (default /var/run/docker.sock)
#   INFERGATE_DOCKER_LOG   dockerd log (default /tmp/infergate-dockerd.log)
set -euo pipefail

SOCK="${INFERGATE_DOCKER_SOCK:-/var/run/docker.sock}"
LOG="${INFERGATE_DOCKER_LOG:-/tmp/infergate-dockerd.log}"

say() { printf 'setup-docker: %s\n' "$*" >&2; }
die() {
    printf 'setup-docker: error: %s\n' "$*" >&2
    exit 1
}

# A daemon answers when GET /_ping on the socket says OK.
daemon_up() {
    [[ -S "$SOCK" ]] || return 1
    if command -v curl >/dev/null; then
        [[ "$(curl -fsS --max-time 2 --unix-socket "$SOCK" http://localhost/_ping 2>/dev/null)" == OK ]]
    else
        python3 - "$SOCK" <<'EOF' 2>/dev/null
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect(sys.argv[1])
s.sendall(b"GET /_ping HTTP/1.0\r\nHost: localhost\r\n\r\n")
data = b""
while chunk := s.recv(4096):
    data += chunk
sys.exit(0 if data.endswith(b"OK") else 1)
EOF
    fi
}

# Prefix for commands that need root: nothing as root, else passwordless sudo.
as_root=()
if [[ "$(id -u)" != 0 ]]; then
    as_root=(sudo -n)
fi

install_docker() {
    command -v apt-get >/dev/null || die "dockerd is not installed and there is no apt-get to install docker.io"
    say "installing Debian's docker.io"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 ||
        die "apt-get update failed (root or passwordless sudo needed)"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >&2 ||
        die "apt-get install docker.io failed"
}

main() {
    printf 'DOCKER_HOST=unix://%s\n' "$SOCK"
    if daemon_up; then
        say "a Docker daemon already answers on $SOCK"
        return 0
    fi
    command -v dockerd >/dev/null || [[ -x /usr/sbin/dockerd ]] || install_docker
    local dockerd
    dockerd="$(command -v dockerd || echo /usr/sbin/dockerd)"
    [[ -x "$dockerd" ]] || die "dockerd not found after installing docker.io"

    say "starting $dockerd (log: $LOG)"
    # setsid: dockerd outlives this script and the test process that ran it.
    # A plain command (not a shell function) so that $! is dockerd's own pid.
    "${as_root[@]}" setsid "$dockerd" --host "unix://$SOCK" --bridge=none --iptables=false --ip6tables=false \
        >"$LOG" 2>&1 </dev/null &
    local pid=$!
    for _ in $(seq 1 60); do
        if daemon_up; then
            printf 'INFERGATE_DOCKERD_PID=%s\n' "$pid"
            say "dockerd is up (pid $pid)"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            say "dockerd exited; last lines of $LOG:"
            tail -n 20 "$LOG" >&2 || true
            die "dockerd could not start here (no privileges, no cgroups, or no overlay support?)"
        fi
        sleep 0.5
    done
    tail -n 20 "$LOG" >&2 || true
    die "dockerd (pid $pid) did not answer on $SOCK within 30 s"
}

main "$@"
