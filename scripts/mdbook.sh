#!/usr/bin/env bash
# Print the path of an mdbook binary (for the book in docs/: make docs,
# make docs-serve, tests/book.rs).
#
#   mdbook="$(scripts/mdbook.sh | tail -n1)"
#
# stdout carries only the path; progress goes to stderr.
#  - MDBOOK set: check that it runs and print it, build nothing.
#  - otherwise `cargo install` the pinned mdbook from crates.io (--locked, only
#    the search feature: no file watcher, no web server) into a cache folder
#    outside the repo keyed by version, and print the binary's path. A second
#    run finds it there and builds nothing.
#
# Knobs: MDBOOK_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator),
#        MDBOOK_BUILD_JOBS (cargo -j, default 2), CARGO (default: cargo).
set -euo pipefail

# The pinned version: docs/book.toml's readers get the book this mdbook makes.
VERSION=0.5.4

log() { printf 'mdbook.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [ -n "${MDBOOK:-}" ]; then
  [ -x "$MDBOOK" ] && [ -f "$MDBOOK" ] || die "MDBOOK=$MDBOOK is not an executable file"
  "$MDBOOK" --version >/dev/null 2>&1 || die "MDBOOK=$MDBOOK does not run \`mdbook --version\`"
  log "using MDBOOK=$MDBOOK ($("$MDBOOK" --version 2>/dev/null))"
  printf '%s\n' "$MDBOOK"
  exit 0
fi

CACHE_ROOT="${MDBOOK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator}"
OUT="$CACHE_ROOT/mdbook-$VERSION"
BIN="$OUT/bin/mdbook"

# The same caching steps as the Go-built tools (use_cached, lock_build, make_stage).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/scripts/lib/go-cache.sh"
mkdir -p "$CACHE_ROOT"
works() { is_binary "$1" && "$1" --version 2>/dev/null | grep -qx "mdbook v$VERSION"; }
use_cached "$BIN" works "$BIN"
lock_build "$BIN" works "$BIN"
make_stage

log "installing mdbook $VERSION into $OUT (about 3 minutes on 2 cores)"
start=$SECONDS
# Its own target folder in the stage: the workspace's target/ is left alone.
CARGO_TARGET_DIR="$STAGE/target" "${CARGO:-cargo}" install mdbook --version "=$VERSION" --locked \
  --no-default-features --features search -j "${MDBOOK_BUILD_JOBS:-2}" --root "$STAGE/root" --quiet
mkdir -p "$OUT/bin"
mv -f "$STAGE/root/bin/mdbook" "$BIN"
log "mdbook installed in $((SECONDS - start))s: $BIN"
printf '%s\n' "$BIN"
