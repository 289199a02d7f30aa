#!/usr/bin/env bash
# Build what a user installs without Rust, into dist/:
#
#   dist/infergate-<version>-py3-none-manylinux_2_17_x86_64.whl
#       the Python wheel carrying the binary (pyproject.toml: maturin's
#       `bin` bindings): pip install / pipx install / uv tool install
#   dist/infergate-<version>-x86_64-linux
#       the same binary on its own: statically linked (the gnu target with
#       +crt-static), so it runs on any x86_64 Linux, and in an image with
#       nothing else in it
#   dist/infergate.bash, dist/_infergate, dist/infergate.fish, dist/man/*.1
#       shell completions and the manual pages, generated from the binary
#   the OCI image infergate:<version> (when a Docker daemon answers):
#       the static binary alone, `docker import`ed (no base image from a
#       registry: none is reachable here); run it with --network host
#
# One release build serves all of them (about 4–5 minutes on 2 cores,
# fresh). maturin comes from PyPI into target/dist-venv.
#
# Environment:
#   INFERGATE_DIST_IMAGE  repository:tag of the image (default infergate:<version>)
#   INFERGATE_DIST_NO_IMAGE=1  skip the image
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TARGET=x86_64-unknown-linux-gnu
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
DIST="$ROOT/dist"
mkdir -p "$DIST"
say() { printf 'build-dist: %s\n' "$*" >&2; }

VENV="$ROOT/target/dist-venv"
if [[ ! -x "$VENV/bin/maturin" ]]; then
    say "installing maturin into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "maturin>=1.7,<2"
fi

# +crt-static for the target only: with --target, RUSTFLAGS do not reach
# build scripts and proc macros, which must stay dynamic.
say "release build, static ($TARGET)"
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    "$VENV/bin/maturin" build --release --target "$TARGET" \
    --compatibility manylinux_2_17 --strip --out "$DIST" >&2

BIN="$ROOT/target/$TARGET/release/infergate"
# A static(-pie) binary: ldd lists no library ("statically linked", or
# "not a dynamic executable" for a non-PIE one).
if ldd "$BIN" 2>&1 | grep -q '=>'; then
    echo "build-dist: $BIN is dynamically linked; expected a static binary" >&2
    exit 1
fi
cp "$BIN" "$DIST/infergate-$VERSION-x86_64-linux"

"$BIN" completions bash >"$DIST/infergate.bash"
"$BIN" completions zsh >"$DIST/_infergate"
"$BIN" completions fish >"$DIST/infergate.fish"
mkdir -p "$DIST/man"
"$BIN" man --out "$DIST/man"

if [[ "${INFERGATE_DIST_NO_IMAGE:-0}" != 1 ]] && command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    TAG="${INFERGATE_DIST_IMAGE:-infergate:$VERSION}"
    TMP="$(mktemp -d)"
    trap 'rm -rf "$TMP"' EXIT
    fs="$TMP/rootfs"
    mkdir -p "$fs/usr/local/bin" "$fs/tmp" "$fs/work"
    chmod 1777 "$fs/tmp"
    cp "$BIN" "$fs/usr/local/bin/infergate"
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$fs" -cf "$TMP/rootfs.tar" .
    docker import \
        --change 'LABEL org.opencontainers.image.title="infergate"' \
        --change "LABEL org.opencontainers.image.version=\"$VERSION\"" \
        --change 'WORKDIR /work' \
        --change 'ENTRYPOINT ["/usr/local/bin/infergate"]' \
        "$TMP/rootfs.tar" "$TAG" >/dev/null
    say "image $TAG: $(docker image inspect --format '{{.Id}}' "$TAG")"
else
    say "no Docker daemon answers (or INFERGATE_DIST_NO_IMAGE=1): no image"
fi
ls -l "$DIST" >&2
