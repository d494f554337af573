# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: host_data
short_description: The host's workload data a node would keep when it is promoted, pod by pod
version_added: 1.4.0
description:
  - Promotion evicts the host's pods from a node and wipes the cluster's own state, but data those pods wrote to
    the node's disk outside it stays, for the tenant's root to read. This names each such pod on node O(node)
    with what it keeps there, namely a C(hostPath) volume some container mounts writable, or a claim bound to a
    PersistentVolume that lives on the node (C(local) or C(hostPath), tied to the node by its node affinity or
    the label C(kosmos.io/local-volume-node)).
  - DaemonSet pods (they stay, and their state is the cluster's plumbing the wipe clears), static pods and pods
    that have ended are not counted. A C(hostPath) volume only mounted read-only leaves nothing of the pod's.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The host's Pod objects (those of the node are picked).
    type: list
    elements: dict
    required: true
  node:
    description: The node's name.
    type: str
    required: true
  volumes:
    description: The host's PersistentVolume objects.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: What the host's pods would leave on the node
  ansible.builtin.set_fact:
    left: "{{ pods.resources | kosmos.kubenest.host_data('kn-w1', volumes.resources) }}"
"""

RETURN = r"""
_value:
  description: One C(namespace/name (what)) phrase per pod, such as C(shop/db-0 (hostPath /srv/db, written)), in
    name order.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

LOCAL_VOLUME_NODE = "kosmos.io/local-volume-node"
HOSTNAME = "kubernetes.io/hostname"


def _owned_by_daemonset(pod):
    return any(ref.get("kind") == "DaemonSet" for ref in (pod.get("metadata") or {}).get("ownerReferences") or [])


def _static(pod):
    return "kubernetes.io/config.mirror" in ((pod.get("metadata") or {}).get("annotations") or {})


def _on_node(volume, node):
    """Whether a PersistentVolume keeps its data on `node`'s disk."""
    spec = volume.get("spec") or {}
    if not (spec.get("local") or spec.get("hostPath")):
        return False
    if ((volume.get("metadata") or {}).get("labels") or {}).get(LOCAL_VOLUME_NODE) == node:
        return True
    terms = (((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")) or []
    for term in terms:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") == HOSTNAME and expr.get("operator") == "In" and node in (expr.get("values") or []):
                return True
    return False


def _writable_mounts(pod):
    """Volume names some container (init containers included) mounts writable."""
    spec = pod.get("spec") or {}
    names = set()
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        for mount in container.get("volumeMounts") or []:
            if not mount.get("readOnly"):
                names.add(mount.get("name"))
    return names


def host_data(pods, node, volumes=None):
    if not isinstance(node, str) or not node:
        raise AnsibleFilterError("host_data: node must be a node name, not %r" % (node,))
    claims = {}
    for volume in volumes or []:
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        if ref.get("namespace") and ref.get("name") and _on_node(volume, node):
            claims[(ref["namespace"], ref["name"])] = volume["metadata"]["name"]
    found = []
    for pod in pods or []:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase")
        ended = phase in ("Succeeded", "Failed")
        if spec.get("nodeName") != node or _owned_by_daemonset(pod) or _static(pod) or ended:
            continue
        writable, kept = _writable_mounts(pod), []
        for volume in spec.get("volumes") or []:
            if volume.get("hostPath") and volume.get("name") in writable:
                kept.append("hostPath %s, written" % volume["hostPath"].get("path"))
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and (meta.get("namespace"), claim) in claims:
                kept.append("PersistentVolume %s on the node" % claims[(meta.get("namespace"), claim)])
        if kept:
            found.append("%s/%s (%s)" % (meta.get("namespace"), meta.get("name"), "; ".join(kept)))
    return sorted(found)


class FilterModule:
    def filters(self):
        return {"host_data": host_data}
