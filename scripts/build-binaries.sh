#!/usr/bin/env bash
# Builds the embedded control plane (kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, etcd, kwok), the Kueue controller and nvidia-judge (NVIDIA's device-plugin config loader,
# build/nvidia-judge) from the Go module proxy at the versions pinned in build/versions.env, into a
# cache outside the work tree keyed by version and by the wrapper modules' go.sum.
# Prints the cache directory of the built binaries on the last line of stdout.
# `--without kueue` leaves Kueue out (`make demo` needs no Kueue; a third of a cold build's time).
set -euo pipefail

with_kueue=true
case "${1:-}" in
  "") ;;
  --without)
    [[ "${2:-}" == kueue ]] || { echo "usage: $0 [--without kueue]" >&2; exit 2; }
    with_kueue=false ;;
  *) echo "usage: $0 [--without kueue]" >&2; exit 2 ;;
esac

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=../build/versions.env
source "$repo_root/build/versions.env"
cache_root="${GPUSHARE_CACHE:-$HOME/.cache/gpushare}"
build_jobs="${GPUSHARE_BUILD_JOBS:-$(nproc)}"

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

module_key() {  # <wrapper dir> -> short hash of its pinned dependency set
  cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -c1-10
}

build_dir() {  # <name> <version> <wrapper dir>
  printf '%s/bin/%s-%s-%s' "$cache_root" "$1" "$2" "$(module_key "$3")"
}

# go build prints nothing while compiling; a heartbeat shows the build is alive.
with_heartbeat() {
  local label="$1"; shift
  local started=$SECONDS
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 15 & wait $! || true
    kill -0 "$pid" 2>/dev/null && log "$label: still compiling ($((SECONDS - started))s)"
  done
  wait "$pid"
}

go_build() {  # <wrapper dir> <out dir> <ldflags> <packages...>
  local wrapper="$1" out="$2" ldflags="$3"; shift 3
  local tmp="$out.partial"
  rm -rf "$tmp" && mkdir -p "$tmp"
  (cd "$wrapper" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -p "$build_jobs" -trimpath \
      -ldflags "-s -w $ldflags" -o "$tmp/" "$@")
  rm -rf "$out" && mv "$tmp" "$out"
}

build_kubernetes() {
  local wrapper="$repo_root/build/kubernetes" out
  out="$(build_dir kubernetes "$KUBERNETES_VERSION" "$wrapper")"
  if [[ -x "$out/kube-apiserver" && -x "$out/kubectl" ]]; then log "kubernetes $KUBERNETES_VERSION cached in $out"; echo "$out"; return; fi
  local major minor ldflags="" key val
  major="$(echo "$KUBERNETES_VERSION" | sed -E 's/^v([0-9]+)\..*/\1/')"
  minor="$(echo "$KUBERNETES_VERSION" | sed -E 's/^v[0-9]+\.([0-9]+)\..*/\1/')"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    for kv in "gitVersion=$KUBERNETES_VERSION" "gitMajor=$major" "gitMinor=$minor" \
              "gitTreeState=clean" "buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
      key="${kv%%=*}"; val="${kv#*=}"; ldflags+=" -X $pkg.$key=$val"
    done
  done
  log "building kubernetes $KUBERNETES_VERSION (apiserver, controller-manager, scheduler, kubectl); a cold build takes a while"
  with_heartbeat "kubernetes $KUBERNETES_VERSION" go_build "$wrapper" "$out" "$ldflags" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  echo "$out"
}

build_etcd() {
  local wrapper="$repo_root/build/etcd" out
  out="$(build_dir etcd "$ETCD_VERSION" "$wrapper")"
  if [[ -x "$out/etcd" ]]; then log "etcd $ETCD_VERSION cached in $out"; echo "$out"; return; fi
  log "building etcd $ETCD_VERSION"
  with_heartbeat "etcd $ETCD_VERSION" go_build "$wrapper" "$out.tmpdir" \
    "-X go.etcd.io/etcd/api/v3/version.GitSHA=release-$ETCD_VERSION" go.etcd.io/etcd/server/v3
  mkdir -p "$out" && mv "$out.tmpdir/server" "$out/etcd" && rm -rf "$out.tmpdir"  # go names it after "server/v3"
  echo "$out"
}

build_kwok() {
  local wrapper="$repo_root/build/kwok" out
  out="$(build_dir kwok "$KWOK_VERSION" "$wrapper")"
  if [[ -x "$out/kwok" ]]; then log "kwok $KWOK_VERSION cached in $out"; echo "$out"; return; fi
  log "building kwok $KWOK_VERSION"
  with_heartbeat "kwok $KWOK_VERSION" go_build "$wrapper" "$out" \
    "-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${KUBERNETES_VERSION#v}" \
    sigs.k8s.io/kwok/cmd/kwok
  echo "$out"
}

# Kueue's CRDs of the same version come from the module it was built from (never committed).
build_kueue() {
  local wrapper="$repo_root/build/kueue" out
  out="$(build_dir kueue "$KUEUE_VERSION" "$wrapper")"
  if [[ -x "$out/kueue" && -f "$out/build.json" ]]; then log "kueue $KUEUE_VERSION cached in $out"; echo "$out"; return; fi
  log "building kueue $KUEUE_VERSION"
  local began=$SECONDS module
  with_heartbeat "kueue $KUEUE_VERSION" go_build "$wrapper" "$out" \
    "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION -X sigs.k8s.io/kueue/pkg/version.GitCommit=unknown -X sigs.k8s.io/kueue/pkg/version.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    sigs.k8s.io/kueue/cmd/kueue
  module="$(cd "$wrapper" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)"
  mkdir -p "$out/kueue-crds" && cp "$module"/config/components/crd/bases/*.yaml "$out/kueue-crds/"
  # The cold-build time, for the benchmarks (they do not rebuild).
  printf '{"version": "%s", "build_s": %d, "build_jobs": %d}\n' "$KUEUE_VERSION" "$((SECONDS - began))" "$build_jobs" >"$out/build.json"
  echo "$out"
}

# The simulator's judge of device-plugin configs: NVIDIA's api/config/v1 behind a small main of ours,
# so its key covers our Go sources too (a few seconds to build).
build_nvidia_judge() {
  local wrapper="$repo_root/build/nvidia-judge" out key
  if ! grep -q "github.com/NVIDIA/k8s-device-plugin $NVIDIA_DEVICE_PLUGIN_VERSION\$" "$wrapper/go.mod"; then
    log "build/nvidia-judge/go.mod does not require k8s-device-plugin $NVIDIA_DEVICE_PLUGIN_VERSION (build/versions.env)"
    return 1
  fi
  key="$(cd "$wrapper" && find . -name '*.go' | sort | xargs cat go.mod go.sum | sha256sum | cut -c1-10)"
  out="$cache_root/bin/nvidia-judge-$NVIDIA_DEVICE_PLUGIN_VERSION-$key"
  if [[ -x "$out/nvidia-judge" ]]; then log "nvidia-judge ($NVIDIA_DEVICE_PLUGIN_VERSION) cached in $out"; echo "$out"; return; fi
  log "building nvidia-judge (k8s-device-plugin $NVIDIA_DEVICE_PLUGIN_VERSION)"
  with_heartbeat "nvidia-judge" go_build "$wrapper" "$out" "" .
  echo "$out"
}

# One build at a time per cache: a second set-up (another checkout on this machine) waits for the
# first, then finds its binaries cached, instead of building into the same directories.
mkdir -p "$cache_root"
exec 9>"$cache_root/build.lock"
if ! flock --nonblock 9; then
  log "another set-up is building into $cache_root; waiting for it"
  flock 9
fi

# All binaries are linked into one directory per combination, the one gpushare uses.
started=$SECONDS
k8s_dir="$(build_kubernetes)"
etcd_dir="$(build_etcd)"
kwok_dir="$(build_kwok)"
judge_dir="$(build_nvidia_judge)"
binaries=("$k8s_dir"/* "$etcd_dir/etcd" "$kwok_dir/kwok" "$judge_dir/nvidia-judge")
dirs="$k8s_dir $etcd_dir $kwok_dir $judge_dir"
if $with_kueue; then
  kueue_dir="$(build_kueue)"
  binaries+=("$kueue_dir/kueue" "$kueue_dir/kueue-crds")
  dirs+=" $kueue_dir"
fi
combo="$cache_root/bin/current-$(echo "$dirs" | sha256sum | cut -c1-10)"
mkdir -p "$combo"
for bin in "${binaries[@]}"; do ln -sfn "$bin" "$combo/"; done
log "binaries ready in $combo ($((SECONDS - started))s)"
echo "$combo"
