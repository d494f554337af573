# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: node_isolation
short_description: Every node's part of keeping tenant nodes apart, from the host cluster's objects
version_added: 1.4.0
description:
  - A node is on a virtual cluster's side while its GlobalNode names that virtual cluster and carries the
    annotation C(kosmos.io/tenant-api-ports), and the host has no Node of that name; every node the host has a
    Node of is on the host's side.
  - Nodes on the host's side let each tenant's nodes reach only the NodePorts of that tenant's API server
    Service (API and Konnectivity, recorded on its GlobalNodes as C(kosmos.io/tenant-api-ports)) and drop
    everything else from tenant nodes; a tenant's node drops what
    comes from other tenants' nodes. The result holds, per node, the arguments of
    M(kosmos.kubenest.node_firewall) (C(allow), C(deny), C(ipv6_deny_unlisted), C(ipv6_allow), C(node_address))
    with its C(address), its C(side) and C(agentCertificates), the agent certificates its GlobalNode records.
  - IPv6 is closed rather than listed wherever a node has someone to keep off; only the host's own IPv6
    InternalIPs and pod networks stay open between the host's nodes.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The host cluster's Node objects.
    type: list
    elements: dict
    required: true
  global_nodes:
    description: The GlobalNode objects.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Work out every node's filter
  ansible.builtin.set_fact:
    isolation: >-
      {{ host_nodes.resources | kosmos.kubenest.node_isolation(global_nodes.resources) }}
"""

RETURN = r"""
_value:
  description: Node name -> C(address), C(side) (C(host) or the virtual cluster's C(namespace/name)), C(allow),
    C(deny), C(ipv6_deny_unlisted), C(ipv6_allow), C(node_address), C(agentCertificates).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.node_isolation import plan


def node_isolation(host_nodes, global_nodes):
    try:
        return plan(host_nodes or [], global_nodes or [])
    except (TypeError, ValueError, AttributeError) as exc:
        raise AnsibleFilterError("node_isolation: %s" % exc) from None


class FilterModule:
    def filters(self):
        return {"node_isolation": node_isolation}
