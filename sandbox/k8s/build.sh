#!/usr/bin/env bash
# Build the Kubernetes and etcd binaries from Go modules, cached outside the repo by version.
# Usage: build.sh [pinned|previous]: the pinned release (default) or the previous minor's, which a tenant can run
# and be upgraded from (versions.env names both).
# Prints the directory that holds the binaries as its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=/dev/null
. "$here/../../versions.env"
case "${1:-pinned}" in
  pinned) ;;
  previous) KUBERNETES_VERSION="$KUBERNETES_PREVIOUS_VERSION" ;;
  *) echo "error: build.sh takes 'pinned' or 'previous', not '$1'" >&2; exit 2 ;;
esac
cache_root="${KUBENEST_CACHE:-$HOME/.cache/kubenest}"
out="$cache_root/k8s/$KUBERNETES_VERSION-etcd-$ETCD_VERSION/bin"
components=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubeadm kubectl)

have_all() {
  for c in "${components[@]}" etcd; do [ -x "$out/$c" ] || return 1; done
}
if have_all; then
  echo "k8s binaries cached" >&2
  echo "$out"; exit 0
fi
# One build at a time (make test builds ahead in the background): a second caller waits, then finds them cached.
mkdir -p "$cache_root/k8s"
exec 9>"$cache_root/k8s/.build.lock"
flock 9
if have_all; then
  echo "$out"; exit 0
fi
command -v go >/dev/null || { echo "error: go toolchain not found on PATH" >&2; exit 1; }
mkdir -p "$out"
work="$(mktemp -d "$cache_root/k8s/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

# shellcheck source=module.sh
. "$here/module.sh"
k8s_gomod kubenest.local/k8sbuild > "$work/go.mod"
ldflags="$(k8s_ldflags)"
cd "$work"
missing=()
for c in "${components[@]}"; do [ -x "$out/$c" ] || missing+=("k8s.io/kubernetes/cmd/$c"); done
if [ ${#missing[@]} -gt 0 ]; then
  # One go build for all of them: the package graph is loaded once and the links run side by side, where one
  # build per command left a core idle during each command's (mostly serial) link.
  echo "building ${missing[*]##*/} $KUBERNETES_VERSION" >&2
  mkdir -p "$work/out"
  go build -trimpath -ldflags "$ldflags" -o "$work/out/" "${missing[@]}"
  for pkg in "${missing[@]}"; do
    c="${pkg##*/}"
    mv "$work/out/$c" "$out/$c.tmp" && mv "$out/$c.tmp" "$out/$c"
  done
fi

if [ ! -x "$out/etcd" ]; then
  echo "building etcd $ETCD_VERSION" >&2
  mkdir -p "$work/etcd" && cd "$work/etcd"
  printf 'module kubenest.local/etcdbuild\ngo 1.24\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > go.mod
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' > main.go
  go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" .
  mv "$out/etcd.tmp" "$out/etcd"
fi
have_all
echo "$out"
