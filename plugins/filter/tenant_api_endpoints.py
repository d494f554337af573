# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: tenant_api_endpoints
short_description: The load-balancer addresses and ports a tenant's nodes reach its API server at, on host nodes
version_added: 1.4.0
description:
  - For a virtual cluster's API server Service of type C(LoadBalancer), every address of its load balancer that
    the host's own nodes take traffic for (an ingress IP whose C(ipMode) is not C(Proxy), as MetalLB and kube-vip
    give), with each Service port named in O(port_names), as C(address:port) joined by commas.
  - That is what a GlobalNode records as C(kosmos.io/tenant-api-endpoints) while its node is the tenant's, so the
    host's nodes let it reach those pairs (M(kosmos.kubenest.node_firewall)). Empty for any other Service, and for
    a load balancer that proxies from its own address (it reaches the NodePorts, which are allowed already).
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The Service object.
    type: dict
    required: true
  port_names:
    description: Names of the Service ports the tenant's nodes use.
    type: list
    elements: str
    default: [https, konnectivity]
"""

EXAMPLES = r"""
- name: The pairs to record on the GlobalNode
  ansible.builtin.set_fact:
    endpoints: "{{ api_service.resources[0] | kosmos.kubenest.tenant_api_endpoints }}"
"""

RETURN = r"""
_value:
  description: C(address:port) pairs joined by commas, such as C(198.18.0.250:6443,198.18.0.250:8132); empty when
    there are none.
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.node_isolation import load_balancer_endpoints


def tenant_api_endpoints(service, port_names=("https", "konnectivity")):
    if not isinstance(service, dict):
        raise AnsibleFilterError("tenant_api_endpoints: expects a Service object, not %s" % type(service).__name__)
    try:
        return load_balancer_endpoints(service, port_names)
    except (TypeError, ValueError, KeyError) as exc:
        raise AnsibleFilterError("tenant_api_endpoints: %s" % exc) from None


class FilterModule:
    def filters(self):
        return {"tenant_api_endpoints": tenant_api_endpoints}
