# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which pods a drain evicts, which it leaves, and which it refuses to touch, as kubectl drain decides."""

from __future__ import annotations

MIRROR = "kubernetes.io/config.mirror"


def pod_ref(pod):
    """namespace/name of a pod, as drains report them."""
    meta = pod.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def classify(pods, force=False, delete_emptydir_data=False):
    """(to evict, left alone, refusals) for the pods of one node.

    Mirror pods (the kubelet's static pods) and running DaemonSet pods stay; finished pods always go; pods
    without a controller go only with force, pods with emptyDir data only with delete_emptydir_data."""
    evict, left, refusals = [], [], []
    unmanaged, local = [], []
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if MIRROR in (meta.get("annotations") or {}):
            left.append(pod)
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            evict.append(pod)
            continue
        owners = meta.get("ownerReferences") or []
        if any(o.get("kind") == "DaemonSet" for o in owners):
            left.append(pod)
            continue
        if not owners and not force:
            unmanaged.append(pod_ref(pod))
            continue
        if any("emptyDir" in v for v in spec.get("volumes") or []) and not delete_emptydir_data:
            local.append(pod_ref(pod))
            continue
        evict.append(pod)
    if unmanaged:
        refusals.append("pods without a controller would be lost (force deletes them): " + ", ".join(unmanaged))
    if local:
        refusals.append("pods with emptyDir data would lose it (delete_emptydir_data allows it): "
                        + ", ".join(local))
    return evict, left, refusals


def refs(pods):
    return [pod_ref(p) for p in pods]


def eviction(pod):
    meta = pod["metadata"]
    return {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]}}


def room_elsewhere(nodes, name):
    """Whether a node other than `name` could take a replacement pod: schedulable and Ready. A disruption budget
    that refuses an eviction waits for such a replacement; with no such node it can only wait for the timeout."""
    for node in nodes:
        if (node.get("metadata") or {}).get("name") == name or (node.get("spec") or {}).get("unschedulable"):
            continue
        conditions = (node.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return True
    return False
