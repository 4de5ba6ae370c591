#!/usr/bin/env bash
# Print the path of the C5C3 Go operator binary (github.com/c5c3/memcached-operator,
# controller-runtime), the operator ours replaces. `make bench-e2e` runs it beside
# ours; tests/migration.rs migrates from it and back.
#
#   binary="$(scripts/go-operator.sh | tail -n1)"
#
# stdout carries only the path; progress goes to stderr.
#  - GO_OPERATOR_BINARY set: check it is an executable file, print it, build nothing.
#  - otherwise build its cmd/ package with the machine's `go` from the version pinned
#    in tests/go-operator/go.mod into a cache folder outside the repo, keyed by that
#    version, and print the binary's path. A second run finds it there.
#
#   crds="$(scripts/go-operator.sh --crds | tail -n1)"
#
# prints a folder holding the CRDs that version ships (the Memcached CRD from its
# config/crd/bases, the ServiceMonitor CRD from config/crd/thirdparty), copied into the
# same cache folder from the module source (go mod download; nothing is built), also
# when GO_OPERATOR_BINARY is set.
#
# Run it with webhooks off (there is no cert-manager here) and on free ports:
#   memcached-operator --enable-webhooks=false --health-probe-bind-address=127.0.0.1:PORT \
#     [--metrics-bind-address=127.0.0.1:PORT --metrics-secure=false]   # metrics are off by default ("0")
# It reads KUBECONFIG (or --kubeconfig); leader election is off by default.
#
# Knobs: GO_OPERATOR_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/go-operator),
#        GO_OPERATOR_BUILD_JOBS (go build -p, default 2), GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

log() { printf 'go-operator: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

MODULE=github.com/c5c3/memcached-operator
NAME=memcached-operator

WANT=binary
case "${1:-}" in
  "") ;;
  --crds) WANT=crds ;;
  *) die "unknown argument ${1} (usage: go-operator.sh [--crds])" ;;
esac

if [ "$WANT" = binary ] && [ -n "${GO_OPERATOR_BINARY:-}" ]; then
  [ -f "$GO_OPERATOR_BINARY" ] && [ -x "$GO_OPERATOR_BINARY" ] ||
    die "GO_OPERATOR_BINARY=$GO_OPERATOR_BINARY is not an executable file"
  log "using GO_OPERATOR_BINARY=$GO_OPERATOR_BINARY"
  printf '%s\n' "$GO_OPERATOR_BINARY"
  exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOD_DIR="$ROOT/tests/go-operator"
# The pinned version comes from go.mod, the single source of truth.
VERSION="$(awk -v m="$MODULE" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$MOD_DIR/go.mod")"
[ -n "$VERSION" ] || die "no $MODULE version in $MOD_DIR/go.mod"

CACHE_ROOT="${GO_OPERATOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/go-operator}"
OUT="$CACHE_ROOT/$VERSION"
BIN="$OUT/$NAME"
CRDS="$OUT/crd"
if [ "$WANT" = binary ]; then RESULT="$BIN"; else RESULT="$CRDS"; fi
have() {
  if [ "$WANT" = binary ]; then [ -f "$BIN" ] && [ -x "$BIN" ]
  else [ -f "$CRDS/memcached.c5c3.io_memcacheds.yaml" ]
  fi
}

. "$ROOT/scripts/lib/go-cache.sh"
mkdir -p "$CACHE_ROOT"
use_cached "$RESULT" have
go_toolchain
lock_build "$RESULT" have
make_stage
mkdir -p "$OUT"

if [ "$WANT" = crds ]; then
  # The module source, from the module cache (downloaded from the proxy if missing).
  SRC="$(cd "$MOD_DIR" && "$GO" mod download -json "$MODULE@$VERSION" | awk -F'"' '$2 == "Dir" { print $4 }')"
  [ -n "$SRC" ] && [ -d "$SRC/config/crd/bases" ] || die "no config/crd/bases in the module source of $MODULE $VERSION ($SRC)"
  mkdir -p "$STAGE/crd"
  cp "$SRC/config/crd/bases/"*.yaml "$SRC/config/crd/thirdparty/"*.yaml "$STAGE/crd/"
  chmod -R u+w "$STAGE/crd"
  rm -rf "$CRDS"
  mv "$STAGE/crd" "$CRDS"
else
  export CGO_ENABLED=0
  log "go: $("$GO" version)"
  log "building $MODULE $VERSION into $OUT (about 3 CPU minutes when the Go caches are cold)"
  start=$SECONDS
  # -mod=readonly: an incomplete go.mod/go.sum fails instead of being rewritten.
  (cd "$MOD_DIR" && "$GO" build -p "${GO_OPERATOR_BUILD_JOBS:-2}" -mod=readonly -trimpath \
    -ldflags="-s -w -X $MODULE/internal/version.Version=$VERSION" \
    -o "$STAGE/$NAME" "$MODULE/cmd")
  log "built in $((SECONDS - start))s"
  mv -f "$STAGE/$NAME" "$BIN"
fi
have || die "finished but $RESULT is missing"
log "ready: $RESULT"
printf '%s\n' "$RESULT"
