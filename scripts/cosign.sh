#!/usr/bin/env bash
# Print the path of a sigstore `cosign` CLI (signs the logic modules the
# module-signature tests push to the loopback registry).
#
#   cosign="$(scripts/cosign.sh | tail -n1)"
#
# stdout carries only the path; progress goes to stderr.
#  - COSIGN_BINARY set: check it runs and print it; build nothing.
#  - otherwise build github.com/sigstore/cosign/v2/cmd/cosign with the
#    machine's `go`, at the version pinned in tests/cosign/go.mod, into a cache
#    folder outside the repo keyed by that version. A second run finds it.
#
# Knobs: COSIGN_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/cosign),
#        GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

log() { printf 'cosign: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [ -n "${COSIGN_BINARY:-}" ]; then
  [ -x "$COSIGN_BINARY" ] || die "COSIGN_BINARY=$COSIGN_BINARY is not an executable file"
  log "using COSIGN_BINARY=$COSIGN_BINARY"
  printf '%s\n' "$COSIGN_BINARY"
  exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOD="$ROOT/tests/cosign"
MODULE=github.com/sigstore/cosign/v2
VERSION="$(awk -v m="$MODULE" '($1 == m && $2 ~ /^v/) || ($1 == "require" && $2 == m) { print ($1 == "require") ? $3 : $2; exit }' "$MOD/go.mod")"
[ -n "$VERSION" ] || die "no $MODULE version in $MOD/go.mod"

CACHE_ROOT="${COSIGN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/cosign}"
OUT="$CACHE_ROOT/${VERSION#v}"
BINARY="$OUT/cosign"
. "$ROOT/scripts/lib/go-cache.sh"
mkdir -p "$CACHE_ROOT"
use_cached "$BINARY" is_binary "$BINARY"
go_toolchain
lock_build "$BINARY" is_binary "$BINARY"
make_stage
log "building $MODULE $VERSION (several minutes on 2 cores when the Go caches are cold)"
start=$SECONDS
(cd "$MOD" && CGO_ENABLED=0 "$GO" build -p 2 -mod=readonly -trimpath -ldflags="-s -w" \
  -o "$STAGE/cosign" "$MODULE/cmd/cosign")
mkdir -p "$OUT"
mv -f "$STAGE/cosign" "$BINARY"
log "built in $((SECONDS - start))s: $BINARY"
printf '%s\n' "$BINARY"
