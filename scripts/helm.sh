#!/usr/bin/env bash
# Print the path of a helm binary (for the chart in charts/memcached-operator
# and its tests, tests/helm.rs).
#
#   helm="$(scripts/helm.sh | tail -n1)"
#
# stdout carries only the path; progress goes to stderr.
#  - HELM_BINARY set: check that it runs and print it, build nothing.
#  - otherwise build helm with the machine's `go` from the Go module pinned in
#    tests/helm/go.mod (a `tool` line) into a cache folder outside the repo,
#    keyed by version, and print the binary's path. A second run finds it
#    there and builds nothing.
#
# Knobs: HELM_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/helm),
#        HELM_BUILD_JOBS (go build -p, default 2), GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

log() { printf 'helm.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [ -n "${HELM_BINARY:-}" ]; then
  [ -x "$HELM_BINARY" ] && [ -f "$HELM_BINARY" ] || die "HELM_BINARY=$HELM_BINARY is not an executable file"
  "$HELM_BINARY" version --short >/dev/null 2>&1 || die "HELM_BINARY=$HELM_BINARY does not run \`helm version\`"
  log "using HELM_BINARY=$HELM_BINARY ($("$HELM_BINARY" version --short 2>/dev/null))"
  printf '%s\n' "$HELM_BINARY"
  exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOD="$ROOT/tests/helm"
MODULE=helm.sh/helm/v4

# The pinned version comes from go.mod, the single source of truth.
VERSION="$(awk -v m="$MODULE" '($1 == m && $2 ~ /^v/) { print $2; exit }' "$MOD/go.mod")"
[ -n "$VERSION" ] || die "no $MODULE version in $MOD/go.mod"

CACHE_ROOT="${HELM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/helm}"
OUT="$CACHE_ROOT/$VERSION"
BIN="$OUT/helm"

. "$ROOT/scripts/lib/go-cache.sh"
mkdir -p "$CACHE_ROOT"
use_cached "$BIN" is_binary "$BIN"
go_toolchain
lock_build "$BIN" is_binary "$BIN"
make_stage

export CGO_ENABLED=0
log "go: $("$GO" version)"
log "building helm $VERSION into $OUT (a few minutes on 2 cores with cold Go caches)"
start=$SECONDS
# -mod=readonly: a go.mod/go.sum that is not complete fails instead of being
# rewritten. The version is stamped as helm's own Makefile does for a tag.
V="$MODULE/internal/version"
(cd "$MOD" && "$GO" build -p "${HELM_BUILD_JOBS:-2}" -mod=readonly -trimpath \
  -ldflags="-s -w -X $V.version=$VERSION -X $V.metadata= -X $V.gitTreeState=clean" \
  -o "$STAGE/helm" "$MODULE/cmd/helm")
mkdir -p "$OUT"
mv -f "$STAGE/helm" "$BIN"
log "helm built in $((SECONDS - start))s: $BIN"
printf '%s\n' "$BIN"
