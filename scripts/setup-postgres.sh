#!/usr/bin/env bash
# A PostgreSQL server on loopback for the ledger tests, owned by this test
# run. Installs Debian's postgresql when it is missing, makes a fresh cluster
# in a new temporary directory (scram-sha-256; one role, `infergate`, whose
# random password is written only to a pgpass file), starts it on a free
# 127.0.0.1 port and prints, on stdout, what the tests read:
#
#   INFERGATE_TEST_POSTGRES=postgres://infergate@127.0.0.1:PORT/postgres
#   PGPASSFILE=DIR/pgpass
#   INFERGATE_TEST_POSTGRES_DIR=DIR
#
# `scripts/setup-postgres.sh --stop DIR` stops that server and removes DIR.
# Diagnostics go to stderr.
set -euo pipefail

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
# The server refuses to run as root: as root, run it as Debian's `postgres`.
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if [ "${1:-}" = "--stop" ]; then
    dir=${2:?usage: setup-postgres.sh --stop DIR}
    if [ -d "$dir/data" ]; then
        as_owner "$(pg_bin)/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
    fi
    rm -rf "$dir"
    exit 0
fi

if [ -z "$(pg_bin)" ]; then
    echo "setup-postgres: installing Debian's postgresql" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq postgresql; } >&2
fi
bin=$(pg_bin)
[ -x "$bin/initdb" ] || { echo "setup-postgres: no initdb under /usr/lib/postgresql" >&2; exit 1; }

dir=$(mktemp -d /tmp/infergate-pg.XXXXXX)
chmod 755 "$dir"
[ "$(id -u)" = 0 ] && chown postgres "$dir"
password=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

pwfile="$dir/initdb-password"
( umask 077; printf '%s\n' "$password" > "$pwfile" )
[ "$(id -u)" = 0 ] && chown postgres "$pwfile"
as_owner "$bin/initdb" -D "$dir/data" -U infergate --auth=scram-sha-256 \
    --pwfile="$pwfile" -E UTF8 --locale=C >&2
rm -f "$pwfile"
# Loopback only; the socket in our own directory; no fsync (a throwaway cluster).
as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off" start >&2

( umask 077; printf '127.0.0.1:%s:*:infergate:%s\n' "$port" "$password" > "$dir/pgpass" )
echo "INFERGATE_TEST_POSTGRES=postgres://infergate@127.0.0.1:$port/postgres"
echo "PGPASSFILE=$dir/pgpass"
echo "INFERGATE_TEST_POSTGRES_DIR=$dir"
