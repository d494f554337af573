#!/usr/bin/env bash
# `make test`: every tier in order, the builds in the background, the time of each tier at the end.
#
# Order, so that no tier waits for a build it does not need:
#   install; the builds start in the background (make prebuild: Kubernetes, Cilium and the component images in
#   one chain, the node, operator and bare machine images in another); lint and unit; the integration tests of the
#   agent and the collection, which need no Kubernetes binary; the rest of integration without images as soon as
#   Kubernetes is built; integration with images once every build is done, while the conformance suite builds;
#   e2e (the kubeadm host's tests included), whose last test runs the suite's smoke subset.
# The table (.ci/tiers.py) is printed however the run ends, and warns when a tier outgrows its share.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
export KUBENEST_TIERS="$PWD/build/tiers.jsonl"
: > "$KUBENEST_TIERS"

m="make --no-print-directory"
tier() { python3 .ci/tiers.py run "$@"; }

builds=""
finish() {
  local status=$?
  [ -n "$builds" ] && kill -- "-$builds" 2>/dev/null
  python3 .ci/tiers.py report
  exit "$status"
}
trap finish EXIT

tier install -- $m install || exit 1
setsid nice -n 10 make --no-print-directory prebuild > build/prebuild.log 2>&1 & builds=$!

tier lint -- $m lint || exit 1
tier unit -- $m unit || exit 1
tier integration:agent -- $m integration-agent || exit 1
# make k8s takes the build's lock: it returns when the background has built Kubernetes.
tier wait:k8s -- $m k8s > /dev/null || exit 1
tier integration -- $m integration-early || exit 1

started=$(date +%s.%N)
wait "$builds"; status=$?; builds=""
python3 .ci/tiers.py record wait:builds "$started" "$status"
if [ "$status" -ne 0 ]; then
  echo "error: a build failed; the end of build/prebuild.log:" >&2
  tail -n 40 build/prebuild.log >&2
  exit 1
fi

# The conformance suite (e2e.test and the images its specs start) builds at low priority beside the tiers that
# mostly wait on machines; the e2e tier's last test, the smoke subset, takes the build's lock and waits for it.
setsid nice -n 10 python3 .ci/tiers.py run build:conformance -- $m conformance-suite > build/conformance-suite.log 2>&1 &
builds=$!
tier integration:images -- $m integration-images || exit 1
tier e2e -- $m e2e || exit 1
wait "$builds" 2>/dev/null; builds=""
