#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_admit
short_description: Admit a node whose kubelet has just joined a cluster
version_added: 1.1.0
description:
  - One call for the API side of a kubelet's join, in the order the kubelet needs it. It waits until the Node
    O(node) is registered (with a pod subnet, see O(require_pod_cidr)), approves the node's kubelet-serving
    certificate requests with the checks of M(kosmos.kubenest.kubelet_serving_csr), waiting for one when the
    kubelet has not sent it yet, and merges O(labels) into the Node's labels.
  - Waiting is polled every half second, bounded by O(timeout) in all.
  - Runs as an action on the controller, so a task costs its requests only.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  ip_addresses:
    description:
      - Addresses the node's serving certificate may name, besides the InternalIP addresses its Node reports.
    type: list
    elements: str
    default: []
  labels:
    description: Labels merged into the Node's labels; other labels are left alone.
    type: dict
    default: {}
  require_pod_cidr:
    description: Wait until the cluster has given the Node a pod subnet (C(spec.podCIDR)).
    type: bool
    default: true
  new_request:
    description:
      - Wait for a request no one has decided yet and approve it; one approved earlier does not count. For a kubelet
        that has just dropped its serving certificate to get one from a new CA.
    type: bool
    default: false
  timeout:
    description: Seconds to wait for the Node and for an acceptable serving-certificate request.
    type: int
    default: 120
attributes:
  check_mode:
    support: full
    description: Looks once without waiting and reports which requests would be approved and whether labels change.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.kube_client.serving_csr
  - kosmos.kubenest.attributes.action
"""

EXAMPLES = r"""
- name: Admit kn-w1 into the virtual cluster
  kosmos.kubenest.node_admit:
    kubeconfig: tenant-admin.conf
    node: kn-w1
    ip_addresses: [198.18.0.12]
    labels: {kosmos.io/globalnode: kn-w1}
  register: admitted

- name: Its pod subnet
  ansible.builtin.debug:
    msg: "{{ admitted.node.pod_cidr }}"
"""

RETURN = r"""
node:
  description: The admitted Node.
  returned: success
  type: dict
  contains:
    name:
      description: Node name.
      type: str
    pod_cidr:
      description: The Node's pod subnet (empty when O(require_pod_cidr=false) and none is given yet).
      type: str
    addresses:
      description: The Node's InternalIP addresses.
      type: list
      elements: str
approved:
  description: Serving-certificate requests this call approved.
  returned: always
  type: list
  elements: str
issued:
  description: Requests of the node approved earlier.
  returned: always
  type: list
  elements: str
refused:
  description: Requests left pending, with the reason.
  returned: always
  type: list
  elements: dict
labels_changed:
  description: Whether O(labels) changed the Node.
  returned: always
  type: bool
"""
