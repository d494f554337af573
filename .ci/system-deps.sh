#!/usr/bin/env bash
# Debian packages the tests and sandbox need; installs only what is missing. docker-registry is the sandbox's
# registry (sandbox/registry), skopeo pushes to it. libseccomp-dev and pkgconf build
# runc (sandbox/runtime), bzip2 and make the conformance suite's busybox.
# prometheus scrapes the operator and a tenant in tests/e2e/test_metrics.py; graphviz draws docs/diagrams;
# chromium opens README and the docs pages in tests/integration/collection/test_docs_in_a_browser.py.
set -euo pipefail
pkgs=(containerd runc containernetworking-plugins debootstrap systemd-container iproute2 skopeo docker-registry
      openssh-server openssh-client iptables conntrack socat rsync git clang-19 busybox-static tinyproxy
      libseccomp-dev pkgconf bzip2 make prometheus graphviz chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "error: missing Debian packages (${missing[*]}); run as root or install them" >&2; exit 1
fi
echo "installing: ${missing[*]}" >&2
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
