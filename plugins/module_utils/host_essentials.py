# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the host cluster itself needs (its DNS, the operator) and whether draining a node would strand it.

Pods and Nodes are plain dicts as the API returns them (camelCase keys). A pod is stranded when no other host
node could take it: Ready, schedulable, staying in the host, matching its nodeSelector and tolerating its taints.
Node affinity is not evaluated: a pod that relies on it is judged by its nodeSelector and tolerations alone.
"""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.module_utils.selectors import selector_match

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def _meta(obj):
    return obj.get("metadata") or {}


def _pod_name(pod):
    return "%s/%s" % (_meta(pod).get("namespace"), _meta(pod).get("name"))


def _runs_per_node(pod):
    """DaemonSet pods are not moved by a drain: each node has its own."""
    return any(ref.get("kind") == "DaemonSet" for ref in _meta(pod).get("ownerReferences") or [])


def _finished(pod):
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed") or bool(_meta(pod).get("deletionTimestamp"))


def essential_pods_on(node, pods, essentials):
    """Pods on `node` matching one of `essentials` ([{namespace, selector}]), apart from DaemonSet pods."""
    found = []
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") != node or _runs_per_node(pod) or _finished(pod):
            continue
        for entry in essentials:
            if _meta(pod).get("namespace") == entry.get("namespace") and selector_match(
                    _meta(pod).get("labels") or {}, entry.get("selector") or {}):
                found.append(pod)
                break
    return found


def tolerates(tolerations, taint):
    for tol in tolerations or []:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists" and not tol.get("key"):
            return True
        if tol.get("key") != taint.get("key"):
            continue
        if tol.get("operator") == "Exists" or (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _ready(node):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def could_run_on(pod, node):
    spec = pod.get("spec") or {}
    if (node.get("spec") or {}).get("unschedulable") or not _ready(node):
        return False
    labels = _meta(node).get("labels") or {}
    if any(labels.get(key) != value for key, value in (spec.get("nodeSelector") or {}).items()):
        return False
    return all(tolerates(spec.get("tolerations"), taint) for taint in (node.get("spec") or {}).get("taints") or []
               if taint.get("effect") in BLOCKING_EFFECTS)


def stranded_by_drain(node, pods, nodes, away, essentials):
    """Names ("namespace/name") of the essential pods on `node` that no host node outside `away` could take."""
    staying = [n for n in nodes if _meta(n).get("name") != node and _meta(n).get("name") not in away]
    return [_pod_name(pod) for pod in essential_pods_on(node, pods, essentials)
            if not any(could_run_on(pod, other) for other in staying)]
