#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_isolation_plan
short_description: Every node's part of keeping tenant nodes apart, read from the host cluster
version_added: 1.4.0
description:
  - Lists the host cluster's Nodes and the GlobalNodes and works out, for every node, the arguments of
    M(kosmos.kubenest.node_firewall) that keep tenant nodes apart, as the P(kosmos.kubenest.node_isolation#filter)
    filter does from objects read beforehand.
  - Runs as an action on the controller, so a task costs its two requests only.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options: {}
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.attributes.action
  - kosmos.kubenest.attributes.read_only
notes:
  - Needs the GlobalNode CRD installed in the host cluster.
seealso:
  - plugin: kosmos.kubenest.node_isolation
    plugin_type: filter
  - module: kosmos.kubenest.node_firewall
"""

EXAMPLES = r"""
- name: Work out every node's filter
  kosmos.kubenest.node_isolation_plan:
    kubeconfig: /etc/kubenest/host.kubeconfig
  register: isolation

- name: Keep each node's filter
  kosmos.kubenest.node_firewall:
    chain: KUBENEST-ISOLATION
    allow: "{{ item.value.allow }}"
    deny: "{{ item.value.deny }}"
    ipv6_deny_unlisted: "{{ item.value.ipv6_deny_unlisted }}"
    ipv6_allow: "{{ item.value.ipv6_allow }}"
    node_address: "{{ item.value.node_address }}"
  loop: "{{ isolation.plan | dict2items }}"
  delegate_to: "{{ item.key }}"
"""

RETURN = r"""
plan:
  description: Node name -> C(address), C(side) (C(host) or the virtual cluster's C(namespace/name)), C(allow),
    C(deny), C(ipv6_deny_unlisted), C(ipv6_allow), C(node_address) (the arguments of
    M(kosmos.kubenest.node_firewall)), and C(agentCertificates), the agent certificates the node's GlobalNode
    records (empty when none is), which the run that applies the plan pins the node's agent to.
  returned: success
  type: dict
  sample:
    node-a: {address: 10.0.0.5, side: host, allow: [], deny: [], ipv6_deny_unlisted: false, ipv6_allow: [],
             node_address: 10.0.0.5, agentCertificates: []}
nodes:
  description: How many Nodes the host cluster has.
  returned: success
  type: int
global_nodes:
  description: How many GlobalNodes there are.
  returned: success
  type: int
"""
