# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: calico_manifests
short_description: The objects of a cluster's pod network from Calico's images, built as data
version_added: 1.2.0
description:
  - Calico's CustomResourceDefinitions, the C(calico-config) ConfigMap, ServiceAccounts with their ClusterRoles and
    bindings, the C(calico-kube-controllers) Deployment with its PodDisruptionBudget and the C(calico-node)
    DaemonSet, as dictionaries in the order they can be applied.
  - Kubernetes datastore, VXLAN between nodes, no BGP daemon, no Typha, one Calico IPAM pool.
  - Every setting is checked and lands in a field of its own.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description:
      - C(node_image), C(cni_image), C(controllers_image), C(api_host) and C(api_port) (where nodes reach the API
        server), C(pod_cidr) (the pool), C(vxlan_mode) (C(Always) or C(CrossSubnet)), C(vxlan_port), C(mtu)
        (0 detects it), C(labels), C(node_resources), C(controllers_resources) and C(cni_bin_dir).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Pod network
  kosmos.kubenest.kube_apply:
    definition: >-
      {{ {'node_image': 'quay.io/calico/node:' ~ calico_version, 'cni_image': 'quay.io/calico/cni:' ~ calico_version,
          'controllers_image': 'quay.io/calico/kube-controllers:' ~ calico_version,
          'api_host': '198.18.0.11', 'api_port': 31443, 'pod_cidr': '198.18.64.0/18'}
         | kosmos.kubenest.calico_manifests }}
  vars:
    calico_version: "{{ lookup('kosmos.kubenest.pinned_version', 'calico') }}"
"""

RETURN = r"""
_value:
  description: The objects.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.module_utils import run_result
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.calico import manifests
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.node_network import known_settings

SETTINGS = ("node_image", "cni_image", "controllers_image", "api_host", "api_port", "pod_cidr", "vxlan_mode",
            "vxlan_port", "mtu", "labels", "node_resources", "controllers_resources", "cni_bin_dir")


def calico_manifests(settings):
    try:
        return manifests(**known_settings(settings, SETTINGS))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(run_result.permanent("InvalidRequest", "pod network (calico): %s" % exc)) from None


class FilterModule:
    def filters(self):
        return {"calico_manifests": calico_manifests}
