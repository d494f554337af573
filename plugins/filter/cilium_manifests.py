# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: cilium_manifests
short_description: The objects of a cluster's pod network (Cilium), built as data
version_added: 1.1.0
description:
  - Configuration ConfigMap, ServiceAccounts with their ClusterRoles and bindings, the operator Deployment and the
    agent DaemonSet, as dictionaries for kosmos.kubenest.kube_apply, in the order they can be applied.
  - Every setting is checked and lands in a field of its own.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description:
      - C(agent_image), C(operator_image), C(api_host) and C(api_port) (where nodes reach the API server),
        C(tunnel_port), C(mtu) (0 detects it), C(labels), C(agent_resources), C(operator_resources) and
        C(cni_bin_dir) (where the nodes' container runtime looks for CNI plugins).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Pod network
  kosmos.kubenest.kube_apply:
    definition: >-
      {{ {'agent_image': 'kubenest.local/cilium:' ~ cilium_version,
          'operator_image': 'kubenest.local/cilium-operator:' ~ cilium_version,
          'api_host': '198.18.0.11', 'api_port': 31443} | kosmos.kubenest.cilium_manifests }}
  vars:
    cilium_version: "{{ lookup('kosmos.kubenest.pinned_version', 'cilium') }}"
"""

RETURN = r"""
_value:
  description: The objects.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.module_utils import run_result
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.cilium import manifests
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.node_network import known_settings

SETTINGS = ("agent_image", "operator_image", "api_host", "api_port", "tunnel_port", "mtu", "labels",
            "agent_resources", "operator_resources", "cni_bin_dir")


def cilium_manifests(settings):
    try:
        return manifests(**known_settings(settings, SETTINGS))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(run_result.permanent("InvalidRequest", "pod network: %s" % exc)) from None


class FilterModule:
    def filters(self):
        return {"cilium_manifests": cilium_manifests}
