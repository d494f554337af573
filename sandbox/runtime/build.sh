#!/usr/bin/env bash
# Build the nodes' container runtime from its Go modules: containerd (daemon, runc shim, ctr) and runc, at the
# releases versions.env pins, cached outside the repo by version. The sandbox's machines run these instead of
# Debian's containerd 1.6, which has no image volumes and which Kubernetes no longer supports. Prints the output
# directory (bin/ holds the programs) as its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=/dev/null
. "$here/../../versions.env"
cache_root="${KUBENEST_CACHE:-$HOME/.cache/kubenest}"
out="$cache_root/runtime/containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION"
programs=(containerd containerd-shim-runc-v2 ctr runc)

have_all() {
  for p in "${programs[@]}"; do [ -x "$out/bin/$p" ] || return 1; done
}
if have_all; then
  echo "container runtime cached" >&2
  echo "$out"; exit 0
fi
# One build at a time (make test builds ahead in the background): a second caller waits, then finds it cached.
mkdir -p "$cache_root/runtime"
exec 9>"$cache_root/runtime/.build.lock"
flock 9
if have_all; then
  echo "$out"; exit 0
fi
command -v go >/dev/null || { echo "error: go toolchain not found on PATH" >&2; exit 1; }
pkg-config --exists libseccomp || {
  echo "error: runc needs libseccomp's headers (Debian: libseccomp-dev) and pkg-config" >&2; exit 1; }
mkdir -p "$out/bin"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local

build() {  # program, package@version, cgo (0/1), tags, ldflags
  [ -x "$out/bin/$1" ] && return 0
  echo "building $1 (${2##*@})" >&2
  CGO_ENABLED="$3" GOBIN="$out/bin.tmp" go install -trimpath -tags "$4" -ldflags "$5" "$2"
  mv "$out/bin.tmp/$(basename "${2%@*}")" "$out/bin/$1"
}
# containerd's own release builds: no cgo (only the btrfs snapshotter needs it, and nodes use overlayfs), the
# shim without gRPC (it speaks ttrpc), versions stamped where `containerd --version` reads them.
ctd=github.com/containerd/containerd/v2
ctd_ldflags="-s -w -X $ctd/version.Version=$CONTAINERD_VERSION -X $ctd/version.Package=$ctd"
build containerd "$ctd/cmd/containerd@$CONTAINERD_VERSION" 0 urfave_cli_no_docs "$ctd_ldflags"
build containerd-shim-runc-v2 "$ctd/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" 0 \
  "urfave_cli_no_docs no_grpc" "$ctd_ldflags"
build ctr "$ctd/cmd/ctr@$CONTAINERD_VERSION" 0 urfave_cli_no_docs "$ctd_ldflags"
# runc needs cgo (its nsexec is C) and libseccomp for the RuntimeDefault profile pods ask for; libpathrs (a Rust
# library) is left out: runc then uses its pure-Go path resolution.
build runc "github.com/opencontainers/runc@$RUNC_VERSION" 1 "seccomp urfave_cli_no_docs" "-s -w"
rm -rf "$out/bin.tmp"
have_all
echo "$out"
