#!/usr/bin/env bash
# Build the upstream conformance suite from the k8s.io/kubernetes module at the pinned version: `e2e.test`
# (test/e2e), the ginkgo v2 CLI that runs its specs in parallel, and the programs of the images its specs start
# (agnhost and nnp from test/images, the sample API server from its module, busybox from its release's source).
# Cached outside the repo by version. Prints the directory that holds them as its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=/dev/null
. "$here/../../versions.env"
cache_root="${KUBENEST_CACHE:-$HOME/.cache/kubenest}"
out="$cache_root/conformance/$KUBERNETES_VERSION/bin"

programs=(e2e.test ginkgo agnhost nnp sample-apiserver busybox)
have_all() {
  for p in "${programs[@]}"; do [ -x "$out/$p" ] || return 1; done
}
if have_all; then
  echo "conformance suite cached" >&2
  echo "$out"; exit 0
fi
mkdir -p "$cache_root/conformance"
exec 9>"$cache_root/conformance/.build.lock"
flock 9
if have_all; then
  echo "$out"; exit 0
fi
command -v go >/dev/null || { echo "error: go toolchain not found on PATH" >&2; exit 1; }
mkdir -p "$out"
work="$(mktemp -d "$cache_root/conformance/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

# The same module as sandbox/k8s/build.sh, with ginkgo at the version k8s.io/kubernetes requires.
# shellcheck source=../k8s/module.sh
. "$here/../k8s/module.sh"
ginkgo_ver="$(sed -n 's#^\s*github.com/onsi/ginkgo/v2 \(v[^ ]*\).*#\1#p' "$(k8s_upstream_gomod)" | head -n 1)"
[ -n "$ginkgo_ver" ] || { echo "error: k8s.io/kubernetes $KUBERNETES_VERSION does not require ginkgo v2" >&2; exit 1; }
k8s_gomod kubenest.local/conformancebuild "require github.com/onsi/ginkgo/v2 $ginkgo_ver" > "$work/go.mod"
staging_ver="v0.${KUBERNETES_VERSION#v1.}"
ldflags="$(k8s_ldflags)"
cd "$work"
if [ ! -x "$out/ginkgo" ]; then
  echo "building ginkgo $ginkgo_ver" >&2
  go build -trimpath -ldflags "-s -w" -o "$out/ginkgo.tmp" github.com/onsi/ginkgo/v2/ginkgo
  mv "$out/ginkgo.tmp" "$out/ginkgo"
fi
if [ ! -x "$out/e2e.test" ]; then
  echo "building e2e.test $KUBERNETES_VERSION" >&2
  go test -c -trimpath -ldflags "$ldflags" -o "$out/e2e.test.tmp" k8s.io/kubernetes/test/e2e
  mv "$out/e2e.test.tmp" "$out/e2e.test"
fi
if [ ! -x "$out/agnhost" ] || [ ! -x "$out/nnp" ]; then
  images="$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images"
  agnhost_ver="$(cat "$images/agnhost/VERSION")"
  echo "building agnhost $agnhost_ver and nnp" >&2
  mkdir -p "$work/out"
  go build -trimpath -ldflags "-s -w -X main.Version=$agnhost_ver" -o "$work/out/agnhost" \
    k8s.io/kubernetes/test/images/agnhost
  go build -trimpath -ldflags "-s -w" -o "$work/out/nnp" k8s.io/kubernetes/test/images/nonewprivs
  mv "$work/out/agnhost" "$out/agnhost" && mv "$work/out/nnp" "$out/nnp"
fi
if [ ! -x "$out/sample-apiserver" ]; then
  echo "building sample-apiserver $staging_ver" >&2
  go build -trimpath -ldflags "$ldflags" -o "$out/sample-apiserver.tmp" k8s.io/sample-apiserver
  mv "$out/sample-apiserver.tmp" "$out/sample-apiserver"
fi
if [ ! -x "$out/busybox" ]; then
  # The upstream release, not Debian's package: Debian's ash drops environment variables whose names are not
  # shell identifiers (a patch for its installer), which the suite's ConfigMap and Secret specs pass in.
  mirror="$(cd "$here/../.." && python3 -c 'from sandbox.machines.aptsources import mirror_for; print(mirror_for("bookworm").uri)')"
  tarball="busybox_$BUSYBOX_VERSION.orig.tar.bz2"
  echo "building busybox $BUSYBOX_VERSION (source from ${mirror%/}/pool/main/b/busybox/)" >&2
  curl -fsS --retry 3 -o "$work/$tarball" "${mirror%/}/pool/main/b/busybox/$tarball"
  echo "$BUSYBOX_SHA256  $work/$tarball" | sha256sum -c --quiet - \
    || { echo "error: $tarball does not have the sha256 versions.env pins" >&2; exit 1; }
  tar -xjf "$work/$tarball" -C "$work"
  cd "$work/busybox-$BUSYBOX_VERSION"
  # The release's defaults, static; tc does not build against current kernel headers (no CBQ).
  make -s defconfig > /dev/null
  sed -i 's/^CONFIG_TC=y/# CONFIG_TC is not set/; s/^# CONFIG_STATIC is not set/CONFIG_STATIC=y/' .config
  make -s -j"$(nproc)" busybox > "$work/busybox.log" 2>&1 || { tail -n 30 "$work/busybox.log" >&2; exit 1; }
  cp busybox "$out/busybox.tmp" && mv "$out/busybox.tmp" "$out/busybox"
fi
have_all
echo "$out"
