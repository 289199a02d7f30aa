#!/usr/bin/env bash
# Build a local container image around the reference engine, for
# tests/container.rs (no registry is reachable, so nothing is pulled).
#
# The image is `docker import`ed from a tiny root filesystem: engine/serve.py
# at /engine/serve.py, the merged-/usr symlinks (/bin, /lib, /lib64, /sbin)
# and empty mount points. What the engine needs from the host — /usr (libc),
# the Python install behind the engine's venv, the venv and the model in the
# engine cache — comes in as read-only bind mounts that the test's plan
# lists (`binds`), so the image stays a few kilobytes and builds in a second.
#
# Prints the image ID (sha256:…), by which plans pin it.
#
# Environment:
#   INFERGATE_TEST_IMAGE  repository:tag to give it (default infergate-reference-engine:test)
#   INFERGATE_TEST_BUILD  a build marker, set as the label infergate.build: builds
#                         with different markers are different images (digests)
set -euo pipefail

TAG="${INFERGATE_TEST_IMAGE:-infergate-reference-engine:test}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
command -v docker >/dev/null || { echo "build-reference-image: docker CLI not found (scripts/setup-docker.sh installs docker.io)" >&2; exit 1; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fs="$TMP/rootfs"
mkdir -p "$fs/engine" "$fs/usr" "$fs/etc" "$fs/tmp" "$fs/root" "$fs/proc" "$fs/sys" "$fs/dev"
chmod 1777 "$fs/tmp"
for d in bin lib lib64 sbin; do ln -s "usr/$d" "$fs/$d"; done
cp "$ROOT/engine/serve.py" "$fs/engine/serve.py"
# Deterministic contents: the same sources give the same layer.
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$fs" -cf "$TMP/rootfs.tar" .

old="$(docker image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
docker import \
    --change 'LABEL org.opencontainers.image.title="infergate reference engine (test image)"' \
    --change 'WORKDIR /engine' \
    ${INFERGATE_TEST_BUILD:+--change "LABEL infergate.build=$INFERGATE_TEST_BUILD"} \
    "$TMP/rootfs.tar" "$TAG" >/dev/null
new="$(docker image inspect --format '{{.Id}}' "$TAG")"
# The previous build, now untagged; kept while a container still uses it.
if [[ -n "$old" && "$old" != "$new" ]]; then
    docker image rm "$old" >/dev/null 2>&1 || true
fi
printf '%s\n' "$new"
