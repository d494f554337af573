# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: hosted_network_policies
short_description: The NetworkPolicies of a hosted virtual-cluster control plane, built as data
version_added: 1.1.0
description:
  - Builds, for kosmos.kubenest.kube_apply, the ingress policies of a virtual cluster's control-plane pods in its host
    namespace. C(etcd) lets only the virtual cluster's own apiserver pods reach etcd's client port;
    C(apiserver) opens only the API port (6443); C(controllers) lets nothing reach the controller-manager and
    the scheduler. Egress is not restricted.
  - Kubelet probes are not subject to NetworkPolicies; a cluster without a policy engine stores them
    without effect.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The virtual cluster (C(name), C(namespace), C(labels), C(selector), C(owner_references)).
    type: dict
    required: true
  which:
    description: The policies to build.
    type: list
    elements: str
    choices: [etcd, apiserver, controllers]
    default: [etcd, apiserver, controllers]
"""

EXAMPLES = r"""
- name: etcd answers only its apiserver
  kosmos.kubenest.kube_apply:
    definition: "{{ kubenest_vc | kosmos.kubenest.hosted_network_policies(['etcd']) }}"
"""

RETURN = r"""
_value:
  description: The NetworkPolicy manifests.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.module_utils import run_result
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_network_policies import (
    POLICIES,
    network_policies,
)


def hosted_network_policies(vc, which=POLICIES):
    try:
        return network_policies(vc, tuple(which))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(run_result.permanent("InvalidRequest", "network policies: %s" % exc)) from None


class FilterModule:
    def filters(self):
        return {"hosted_network_policies": hosted_network_policies}
