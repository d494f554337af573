#!/usr/bin/env bash
# Build Cilium's agent, CNI plugin and operator from the Go module, cached outside the repo by version, and keep
# the datapath sources (bpf/) the agent compiles on each node and the release's CRDs (crds/). Prints the output
# directory as its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=/dev/null
. "$here/../../versions.env"
cache_root="${KUBENEST_CACHE:-$HOME/.cache/kubenest}"
out="$cache_root/cilium/$CILIUM_VERSION"
programs=(cilium-agent cilium-cni cilium-operator-generic)

have_all() {
  for p in "${programs[@]}"; do [ -x "$out/bin/$p" ] || return 1; done
  [ -f "$out/bpf/bpf_lxc.c" ] && [ -s "$out/crds/schema-version" ]
}
if have_all; then
  echo "cilium binaries cached" >&2
  echo "$out"; exit 0
fi
# One build at a time (make test builds ahead in the background): a second caller waits, then finds them cached.
mkdir -p "$cache_root/cilium"
exec 9>"$cache_root/cilium/.build.lock"
flock 9
if have_all; then
  echo "$out"; exit 0
fi
command -v go >/dev/null || { echo "error: go toolchain not found on PATH" >&2; exit 1; }
mkdir -p "$out/bin" "$cache_root/cilium"
work="$(mktemp -d "$cache_root/cilium/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

# Two requirements of cilium's go.mod that the module proxy cannot serve: the gobgp pseudo-version (the release
# it was cut from is served) and sigs.k8s.io/mcs-api/controllers (a local stand-in, see mcsapi/).
cp -r "$here/mcsapi" "$work/mcsapi"
cat > "$work/go.mod" <<MOD
module kubenest.local/ciliumbuild

go 1.26.0

require github.com/cilium/cilium $CILIUM_VERSION

replace github.com/osrg/gobgp/v4 => github.com/osrg/gobgp/v4 $CILIUM_GOBGP_VERSION

replace sigs.k8s.io/mcs-api/controllers => ./mcsapi
MOD
printf '//go:build tools\n\npackage ciliumbuild\n\nimport (\n\t_ "github.com/cilium/cilium/daemon"\n\t_ "github.com/cilium/cilium/operator"\n\t_ "github.com/cilium/cilium/plugins/cilium-cni"\n)\n' > "$work/tools.go"
ldflags="-s -w -X github.com/cilium/cilium/pkg/version.ciliumVersion=${CILIUM_VERSION#v}"
cd "$work"
build() {  # program, package, extra build tags
  [ -x "$out/bin/$1" ] && return 0
  echo "building $1 $CILIUM_VERSION" >&2
  go build -trimpath -tags "osusergo${3:+,$3}" -ldflags "$ldflags" -o "$out/bin/$1.tmp" "$2"
  mv "$out/bin/$1.tmp" "$out/bin/$1"
}
build cilium-cni github.com/cilium/cilium/plugins/cilium-cni
build cilium-agent github.com/cilium/cilium/daemon
build cilium-operator-generic github.com/cilium/cilium/operator ipam_provider_operator
src="$(go list -m -f '{{.Dir}}' github.com/cilium/cilium)"
rm -rf "$out/bpf.tmp" && cp -r "$src/bpf" "$out/bpf.tmp" && chmod -R u+w "$out/bpf.tmp"
rm -rf "$out/bpf" && mv "$out/bpf.tmp" "$out/bpf"
# The release's CRDs and their schema version, to register them before the first node's operator does.
rm -rf "$out/crds.tmp" && cp -r "$src/pkg/k8s/apis/cilium.io/client/crds" "$out/crds.tmp" && chmod -R u+w "$out/crds.tmp"
sed -n 's/^[[:space:]]*CustomResourceDefinitionSchemaVersion = "\([^"]*\)".*/\1/p' \
  "$src/pkg/k8s/apis/cilium.io/register.go" > "$out/crds.tmp/schema-version"
rm -rf "$out/crds" && mv "$out/crds.tmp" "$out/crds"
have_all
echo "$out"
