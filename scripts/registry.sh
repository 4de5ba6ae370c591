#!/usr/bin/env bash
# Print the path of a CNCF distribution `registry` binary (the OCI registry the
# module-distribution tests run on loopback).
#
#   registry="$(scripts/registry.sh | tail -n1)"
#
# stdout carries only the path; progress goes to stderr.
#  - REGISTRY_BINARY set: check it runs and print it; build nothing.
#  - otherwise build github.com/distribution/distribution/v3/cmd/registry with
#    the machine's `go`, at the version pinned in tests/registry/go.mod, into a
#    cache folder outside the repo keyed by that version. A second run finds it.
#
# Knobs: REGISTRY_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/registry),
#        GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

log() { printf 'registry: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [ -n "${REGISTRY_BINARY:-}" ]; then
  [ -x "$REGISTRY_BINARY" ] || die "REGISTRY_BINARY=$REGISTRY_BINARY is not an executable file"
  log "using REGISTRY_BINARY=$REGISTRY_BINARY"
  printf '%s\n' "$REGISTRY_BINARY"
  exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOD="$ROOT/tests/registry"
MODULE=github.com/distribution/distribution/v3
VERSION="$(awk -v m="$MODULE" '($1 == m && $2 ~ /^v/) || ($1 == "require" && $2 == m) { print ($1 == "require") ? $3 : $2; exit }' "$MOD/go.mod")"
[ -n "$VERSION" ] || die "no $MODULE version in $MOD/go.mod"

CACHE_ROOT="${REGISTRY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/registry}"
OUT="$CACHE_ROOT/${VERSION#v}"
BINARY="$OUT/registry"
. "$ROOT/scripts/lib/go-cache.sh"
mkdir -p "$CACHE_ROOT"
use_cached "$BINARY" is_binary "$BINARY"
go_toolchain
lock_build "$BINARY" is_binary "$BINARY"
make_stage
log "building $MODULE $VERSION (a few minutes on 2 cores when the Go caches are cold)"
start=$SECONDS
(cd "$MOD" && CGO_ENABLED=0 "$GO" build -p 2 -mod=readonly -trimpath -ldflags="-s -w" \
  -o "$STAGE/registry" "$MODULE/cmd/registry")
mkdir -p "$OUT"
mv -f "$STAGE/registry" "$BINARY"
log "built in $((SECONDS - start))s: $BINARY"
printf '%s\n' "$BINARY"
