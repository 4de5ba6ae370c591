#!/usr/bin/env bash
# Print the path of a metacontroller binary (see third_party/metacontroller/README.md).
#
#   metacontroller="$(scripts/metacontroller.sh | tail -n1)"
#
# stdout carries only the binary's path; progress goes to stderr.
#  - METACONTROLLER_BIN set: check it runs and print it, build nothing.
#  - otherwise build it with the machine's `go` from the pinned source in
#    third_party/metacontroller (its own go.mod and go.sum; its module
#    path is `metacontroller`, which the Go module proxy cannot serve, so the
#    source is kept in the repo) into a cache folder outside the repo, keyed by
#    version, and print that path. A second run finds it and builds nothing.
#
# Knobs: METACONTROLLER_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/metacontroller),
#        METACONTROLLER_BUILD_JOBS (go build -p, default 2), GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

log() { printf 'metacontroller: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [ -n "${METACONTROLLER_BIN:-}" ]; then
  [ -x "$METACONTROLLER_BIN" ] && [ -f "$METACONTROLLER_BIN" ] || die "METACONTROLLER_BIN=$METACONTROLLER_BIN is not an executable file"
  log "using METACONTROLLER_BIN=$METACONTROLLER_BIN"
  printf '%s\n' "$METACONTROLLER_BIN"
  exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/third_party/metacontroller"
# The pinned release: the first word of VERSION (the commit follows it).
VERSION="$(awk 'NR == 1 { print $1 }' "$SRC/VERSION" 2>/dev/null || true)"
[ -n "$VERSION" ] || die "no version in $SRC/VERSION"
[ -f "$SRC/go.mod" ] || die "$SRC/go.mod is missing"

CACHE_ROOT="${METACONTROLLER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/metacontroller}"
OUT="$CACHE_ROOT/${VERSION#v}"
BIN="$OUT/metacontroller"

. "$ROOT/scripts/lib/go-cache.sh"
mkdir -p "$CACHE_ROOT"
use_cached "$BIN" is_binary "$BIN"
go_toolchain
lock_build "$BIN" is_binary "$BIN"
make_stage
log "go: $("$GO" version)"
log "building metacontroller $VERSION into $OUT (~3 min on 2 cores when the Go caches are cold)"
start=$SECONDS
# -mod=readonly: a go.sum that is not complete fails instead of being rewritten.
(cd "$SRC" && CGO_ENABLED=0 "$GO" build -p "${METACONTROLLER_BUILD_JOBS:-2}" -mod=readonly -trimpath \
  -ldflags="-s -w -X main.version=$VERSION" -o "$STAGE/metacontroller" ./pkg/cmd/metacontroller)
mkdir -p "$OUT"
mv -f "$STAGE/metacontroller" "$BIN"
log "built in $((SECONDS - start))s: $BIN"
printf '%s\n' "$BIN"
