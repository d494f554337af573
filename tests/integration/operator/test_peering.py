"""Two operator replicas sharing a kopf peering: only one reconciles, the other takes over when it stops."""

from __future__ import annotations

import uuid

from kubernetes.client.rest import ApiException

from tests.integration.operator.operatorproc import condition, phase, stays, wait_for_vc
from tests.support.procs import wait_until

TIMEOUT = 120


def peers(kube, name: str) -> dict:
    return kube.custom.get_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", name).get("status") or {}


def test_only_one_replica_reconciles_and_the_other_takes_over(kube, operators):
    peering = f"kubenest-test-{uuid.uuid4().hex[:6]}"
    kube.custom.create_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", {
        "apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": peering}})
    ns = kube.new_namespace(sleep=0)
    try:
        first = operators.start("first", "--namespace", ns, "--peering", peering, standalone=False)
        wait_until(lambda: len(peers(kube, peering)) == 1, 30, "first replica in the peering", first.process)
        second = operators.start("second", "--namespace", ns, "--peering", peering, standalone=False)
        wait_until(lambda: len(peers(kube, peering)) == 2, 30, "second replica in the peering", second.process)
        # A newcomer starts paused and stays so: its priority is below the working replica's.
        wait_until(lambda: "Pausing the watch-stream for virtualclusters" in second.log(), 30,
                   "second replica paused", second.process)
        priorities = {identity: info["priority"] for identity, info in peers(kube, peering).items()}
        assert len(priorities) == 2 and len(set(priorities.values())) == 2, priorities

        kube.create_vc(ns, "iota", {})
        wait_for_vc(kube, ns, "iota", lambda vc: phase(vc) == "Completed" and condition(vc).get("status") == "True",
                    TIMEOUT, "iota Completed", first)
        assert stays(lambda: kube.runs(ns, "iota")["present"] == 1, 8)
        assert "run " in first.log() and "iota] run " not in second.log()

        # A clean stop leaves the peering at once; the standby resumes and serves the next change.
        assert first.stop() == 0
        wait_until(lambda: "Resuming operations after the pause" in second.log(), 60, "second replica resuming",
                   second.process)
        changed = kube.patch_vc_spec(ns, "iota", {"externalIP": "192.0.2.20"})
        wait_for_vc(kube, ns, "iota", lambda vc: phase(vc) == "Completed" and vc["status"].get(
            "observedGeneration", 0) >= changed["metadata"]["generation"], TIMEOUT, "iota updated by the second",
            second)
        assert "iota] run " in second.log()
    finally:
        try:
            kube.custom.delete_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", peering)
        except ApiException as exc:
            if exc.status != 404:
                raise
