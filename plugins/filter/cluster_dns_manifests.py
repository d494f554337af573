# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_dns_manifests
short_description: The objects of a cluster's DNS (CoreDNS), built as data
version_added: 1.1.0
description:
  - ServiceAccount, ClusterRole and binding, Corefile ConfigMap, Deployment, Service at the cluster DNS address
    and PodDisruptionBudget, as dictionaries for kosmos.kubenest.kube_apply, in the order they can be applied.
  - Every setting is checked and lands in a field of its own; the Corefile is assembled from checked values.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The service CIDR of the cluster.
    type: str
    required: true
  settings:
    description:
      - C(image) (required), C(cluster_domain), C(upstream) (IP addresses or C(/etc/resolv.conf); empty answers
        NXDOMAIN for names outside the cluster), C(nodes) (schedulable nodes now), C(replicas) (at most,
        one per node), C(labels) and C(resources).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Cluster DNS
  kosmos.kubenest.kube_apply:
    definition: >-
      {{ '10.96.0.0/12' | kosmos.kubenest.cluster_dns_manifests({
           'image': 'kubenest.local/coredns:' ~ lookup('kosmos.kubenest.pinned_version', 'coredns')[1:],
           'nodes': 3, 'upstream': []}) }}
"""

RETURN = r"""
_value:
  description: The objects.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.module_utils import run_result
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.cluster_dns import manifests

SETTINGS = ("cluster_domain", "image", "upstream", "nodes", "replicas", "labels", "resources")


def cluster_dns_manifests(service_cidr, settings=None):
    settings = dict(settings or {})
    unknown = sorted(set(settings) - set(SETTINGS))
    try:
        if unknown:
            raise ValueError("unknown settings %s" % ", ".join(unknown))
        if not settings.get("image"):
            raise ValueError("settings need an image, such as registry.example.com/coredns:<tag>")
        return manifests(service_cidr, **settings)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(run_result.permanent("InvalidRequest", "cluster DNS: %s" % exc)) from None


class FilterModule:
    def filters(self):
        return {"cluster_dns_manifests": cluster_dns_manifests}
