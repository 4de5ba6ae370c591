#!/usr/bin/env bash
# Print a folder holding the Kubernetes test control plane binaries:
# etcd, kube-apiserver and kube-controller-manager (see tests/envtest/README.md).
#
#   assets="$(scripts/envtest.sh | tail -n1)"
#
# stdout carries only the folder path; progress goes to stderr.
#  - KUBEBUILDER_ASSETS set and holding all three binaries: print it, build nothing.
#  - otherwise build them with the machine's `go` from the Go modules pinned in
#    tests/envtest (Kubernetes) and tests/envtest/cmd/etcd (etcd) into a cache
#    folder outside the repo, keyed by version, and print that folder. A second
#    run finds them there and builds nothing.
#
# Knobs: ENVTEST_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/envtest),
#        ENVTEST_BUILD_JOBS (go build -p, default 2), GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

log() { printf 'envtest: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

BINARIES=(etcd kube-apiserver kube-controller-manager)

has_all() {
  local dir="$1" b
  [ -n "$dir" ] && [ -d "$dir" ] || return 1
  for b in "${BINARIES[@]}"; do
    [ -x "$dir/$b" ] && [ -f "$dir/$b" ] || return 1
  done
}

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  if has_all "$KUBEBUILDER_ASSETS"; then
    log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
    printf '%s\n' "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks one of: ${BINARIES[*]}; using the build cache"
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_MOD="$ROOT/tests/envtest"
ETCD_MOD="$ROOT/tests/envtest/cmd/etcd"

# The pinned versions come from the go.mod files, the single source of truth.
mod_version() { # go.mod module-path
  awk -v m="$2" '($1 == m && $2 ~ /^v/) || ($1 == "require" && $2 == m) { v = ($1 == "require") ? $3 : $2; print v; exit }' "$1"
}
K8S_VERSION="$(mod_version "$K8S_MOD/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(mod_version "$ETCD_MOD/go.mod" go.etcd.io/etcd/server/v3)"
[ -n "$K8S_VERSION" ] || die "no k8s.io/kubernetes version in $K8S_MOD/go.mod"
[ -n "$ETCD_VERSION" ] || die "no go.etcd.io/etcd/server/v3 version in $ETCD_MOD/go.mod"

CACHE_ROOT="${ENVTEST_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/envtest}"
OUT="$CACHE_ROOT/k8s-${K8S_VERSION#v}-etcd-${ETCD_VERSION#v}"

if has_all "$OUT"; then
  log "cached: $OUT"
  printf '%s\n' "$OUT"
  exit 0
fi

GO="${GO:-}"
if [ -z "$GO" ]; then
  if command -v go >/dev/null 2>&1; then GO=go
  elif [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go
  else die "no go toolchain found (set GO=/path/to/go)"
  fi
fi

mkdir -p "$CACHE_ROOT"
# Serialise concurrent runs (e.g. parallel test binaries) on one lock per version.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$OUT.lock"
  if ! flock -n 9; then
    log "another build holds $OUT.lock; waiting"
    flock 9
  fi
  if has_all "$OUT"; then
    log "cached (built by another run): $OUT"
    printf '%s\n' "$OUT"
    exit 0
  fi
fi

JOBS="${ENVTEST_BUILD_JOBS:-2}"
STAGE="$(mktemp -d "$CACHE_ROOT/.build.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT

export CGO_ENABLED=0
# GOFLAGS may carry the caller's extras; -mod=readonly on the command line makes
# a go.mod/go.sum that is not complete fail instead of being rewritten.
BUILD=("$GO" build -p "$JOBS" -mod=readonly -trimpath)

log "go: $("$GO" version)"
log "building Kubernetes $K8S_VERSION (kube-apiserver, kube-controller-manager) into $OUT (~5 min on 2 cores when the Go caches are cold)"
start=$SECONDS
V=k8s.io/component-base/version
minor="${K8S_VERSION#v*.}"; minor="${minor%%.*}"
major="${K8S_VERSION#v}"; major="${major%%.*}"
(cd "$K8S_MOD" && "${BUILD[@]}" \
  -ldflags="-s -w -X $V.gitVersion=$K8S_VERSION -X $V.gitMajor=$major -X $V.gitMinor=$minor -X $V.gitTreeState=clean" \
  -o "$STAGE/" ./cmd/kube-apiserver ./cmd/kube-controller-manager)
log "Kubernetes built in $((SECONDS - start))s"

log "building etcd $ETCD_VERSION"
start=$SECONDS
(cd "$ETCD_MOD" && "${BUILD[@]}" -ldflags="-s -w" -o "$STAGE/etcd" .)
log "etcd built in $((SECONDS - start))s"

mkdir -p "$OUT"
for b in "${BINARIES[@]}"; do
  mv -f "$STAGE/$b" "$OUT/$b"
done
has_all "$OUT" || die "build finished but $OUT lacks one of: ${BINARIES[*]}"
log "ready: $OUT"
printf '%s\n' "$OUT"
