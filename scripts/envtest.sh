#!/usr/bin/env bash
# Print a folder holding the Kubernetes test control plane binaries:
# etcd, kube-apiserver, kube-controller-manager, kubectl, and for the pods mode
# kube-scheduler and kwok (the fake kubelet) (see tests/envtest/README.md).
#
#   assets="$(scripts/envtest.sh | tail -n1)"
#
# stdout carries only the folder path; progress goes to stderr.
#  - KUBEBUILDER_ASSETS set and holding all six binaries: print it, build nothing.
#  - KUBEBUILDER_ASSETS set but missing some (controller-runtime's setup-envtest
#    ships no kube-controller-manager, kube-scheduler or kwok): build only the
#    missing ones into the cache, and print a cache folder of symlinks that
#    takes the present ones from KUBEBUILDER_ASSETS and the rest from the cache.
#  - otherwise build them with the machine's `go` from the Go modules pinned in
#    tests/envtest (Kubernetes), tests/envtest/cmd/etcd (etcd) and
#    tests/envtest/cmd/kwok (kwok) into a cache folder outside the repo, keyed
#    by version, and print that folder (kwok lives in a folder keyed by its own
#    version, linked from there). A second
#    run finds them there and builds nothing; a folder holding only some of
#    them (an older cache) gets just the missing ones built.
#
# Knobs: ENVTEST_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/envtest),
#        ENVTEST_BUILD_JOBS (go build -p, default 2), GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

log() { printf 'envtest: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

BINARIES=(etcd kube-apiserver kube-controller-manager kubectl kube-scheduler kwok)

has() { [ -x "$1/$2" ] && [ -f "$1/$2" ]; }
missing_in() { # dir -> names of the binaries it lacks, one a line
  local b
  for b in "${BINARIES[@]}"; do has "$1" "$b" || printf '%s\n' "$b"; done
}
has_all() { [ -n "$1" ] && [ -d "$1" ] && [ -z "$(missing_in "$1")" ]; }

ASSETS_MISSING=()
if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  if has_all "$KUBEBUILDER_ASSETS"; then
    log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
    printf '%s\n' "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  [ -d "$KUBEBUILDER_ASSETS" ] || die "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS is not a folder"
  mapfile -t ASSETS_MISSING < <(missing_in "$KUBEBUILDER_ASSETS")
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks: ${ASSETS_MISSING[*]}; building those into the cache"
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_MOD="$ROOT/tests/envtest"
ETCD_MOD="$ROOT/tests/envtest/cmd/etcd"
KWOK_MOD="$ROOT/tests/envtest/cmd/kwok"

# The pinned versions come from the go.mod files, the single source of truth.
mod_version() { # go.mod module-path
  awk -v m="$2" '($1 == m && $2 ~ /^v/) || ($1 == "require" && $2 == m) { v = ($1 == "require") ? $3 : $2; print v; exit }' "$1"
}
K8S_VERSION="$(mod_version "$K8S_MOD/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(mod_version "$ETCD_MOD/go.mod" go.etcd.io/etcd/server/v3)"
KWOK_VERSION="$(mod_version "$KWOK_MOD/go.mod" sigs.k8s.io/kwok)"
[ -n "$K8S_VERSION" ] || die "no k8s.io/kubernetes version in $K8S_MOD/go.mod"
[ -n "$ETCD_VERSION" ] || die "no go.etcd.io/etcd/server/v3 version in $ETCD_MOD/go.mod"
[ -n "$KWOK_VERSION" ] || die "no sigs.k8s.io/kwok version in $KWOK_MOD/go.mod"

CACHE_ROOT="${ENVTEST_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memcached-operator/envtest}"
OUT="$CACHE_ROOT/k8s-${K8S_VERSION#v}-etcd-${ETCD_VERSION#v}"
# kwok has a version of its own: its binary is kept apart and $OUT/kwok links
# to it, so bumping kwok rebuilds only kwok (and an $OUT linking to another
# kwok version counts as lacking it).
KWOK_OUT="$CACHE_ROOT/kwok-${KWOK_VERSION#v}"
in_out() { # name: $OUT holds this version of it
  if [ "$1" = kwok ]; then
    [ "$(readlink "$OUT/kwok" 2>/dev/null)" = "$KWOK_OUT/kwok" ] && has "$KWOK_OUT" kwok
  else
    has "$OUT" "$1"
  fi
}

# What the cache folder must hold: everything, or only what KUBEBUILDER_ASSETS lacks.
if [ ${#ASSETS_MISSING[@]} -gt 0 ]; then WANT=("${ASSETS_MISSING[@]}"); else WANT=("${BINARIES[@]}"); fi
to_build() { local b; for b in "${WANT[@]}"; do in_out "$b" || printf '%s\n' "$b"; done; }

# A folder of symlinks: the binaries KUBEBUILDER_ASSETS has, plus the ones built
# into $OUT. Keyed by the assets path, so two asset folders never share one.
finish() {
  if [ ${#ASSETS_MISSING[@]} -eq 0 ]; then
    printf '%s\n' "$OUT"
    return
  fi
  local key mixed b
  key="$(printf '%s' "$KUBEBUILDER_ASSETS" | sha256sum | cut -c1-12)"
  mixed="$CACHE_ROOT/assets-$key"
  mkdir -p "$mixed"
  for b in "${BINARIES[@]}"; do
    if has "$KUBEBUILDER_ASSETS" "$b"; then
      ln -sfn "$(cd "$KUBEBUILDER_ASSETS" && pwd)/$b" "$mixed/$b"
    else
      ln -sfn "$OUT/$b" "$mixed/$b"
    fi
  done
  has_all "$mixed" || die "$mixed lacks one of: ${BINARIES[*]}"
  log "ready: $mixed (from $KUBEBUILDER_ASSETS and $OUT)"
  printf '%s\n' "$mixed"
}

mkdir -p "$CACHE_ROOT"
if [ -z "$(to_build)" ]; then
  log "cached: $OUT"
  finish
  exit 0
fi

GO="${GO:-}"
if [ -z "$GO" ]; then
  if command -v go >/dev/null 2>&1; then GO=go
  elif [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go
  else die "no go toolchain found (set GO=/path/to/go)"
  fi
fi

# Serialise concurrent runs (e.g. parallel test binaries) on one lock per version.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$OUT.lock"
  if ! flock -n 9; then
    log "another build holds $OUT.lock; waiting"
    flock 9
  fi
  if [ -z "$(to_build)" ]; then
    log "cached (built by another run): $OUT"
    finish
    exit 0
  fi
fi

mapfile -t BUILD_NOW < <(to_build)
JOBS="${ENVTEST_BUILD_JOBS:-2}"
STAGE="$(mktemp -d "$CACHE_ROOT/.build.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT

export CGO_ENABLED=0
# GOFLAGS may carry the caller's extras; -mod=readonly on the command line makes
# a go.mod/go.sum that is not complete fail instead of being rewritten.
BUILD=("$GO" build -p "$JOBS" -mod=readonly -trimpath)

log "go: $("$GO" version)"
K8S_PKGS=()
for b in "${BUILD_NOW[@]}"; do
  case "$b" in etcd | kwok) ;; *) K8S_PKGS+=("./cmd/$b") ;; esac
done
if [ ${#K8S_PKGS[@]} -gt 0 ]; then
  log "building Kubernetes $K8S_VERSION (${K8S_PKGS[*]#./cmd/}) into $OUT (~5 min on 2 cores when the Go caches are cold)"
  start=$SECONDS
  V=k8s.io/component-base/version
  minor="${K8S_VERSION#v*.}"; minor="${minor%%.*}"
  major="${K8S_VERSION#v}"; major="${major%%.*}"
  # One package builds to STAGE/<name>; several build into STAGE/ by name.
  if [ ${#K8S_PKGS[@]} -eq 1 ]; then dest="$STAGE/${K8S_PKGS[0]#./cmd/}"; else dest="$STAGE/"; fi
  (cd "$K8S_MOD" && "${BUILD[@]}" \
    -ldflags="-s -w -X $V.gitVersion=$K8S_VERSION -X $V.gitMajor=$major -X $V.gitMinor=$minor -X $V.gitTreeState=clean" \
    -o "$dest" "${K8S_PKGS[@]}")
  log "Kubernetes built in $((SECONDS - start))s"
fi

if printf '%s\n' "${BUILD_NOW[@]}" | grep -qx etcd; then
  log "building etcd $ETCD_VERSION"
  start=$SECONDS
  (cd "$ETCD_MOD" && "${BUILD[@]}" -ldflags="-s -w" -o "$STAGE/etcd" .)
  log "etcd built in $((SECONDS - start))s"
fi

mkdir -p "$OUT"
if printf '%s\n' "${BUILD_NOW[@]}" | grep -qx kwok; then
  if ! has "$KWOK_OUT" kwok; then
    log "building kwok $KWOK_VERSION into $KWOK_OUT"
    start=$SECONDS
    (cd "$KWOK_MOD" && "${BUILD[@]}" -ldflags="-s -w" -o "$STAGE/kwok" sigs.k8s.io/kwok/cmd/kwok)
    mkdir -p "$KWOK_OUT"
    mv -f "$STAGE/kwok" "$KWOK_OUT/kwok"
    log "kwok built in $((SECONDS - start))s"
  fi
  ln -sfn "$KWOK_OUT/kwok" "$OUT/kwok"
fi
for b in "${BUILD_NOW[@]}"; do
  [ "$b" = kwok ] || mv -f "$STAGE/$b" "$OUT/$b"
done
[ -z "$(to_build)" ] || die "build finished but $OUT lacks one of: ${WANT[*]}"
log "built: $OUT"
finish
