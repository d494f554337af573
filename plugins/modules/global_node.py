#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: global_node
short_description: Claim, hand over and release host nodes (GlobalNodes) for a virtual cluster
version_added: 1.1.0
description:
  - Moves GlobalNodes through the claim protocol C(free -> reserved -> occupied -> returning -> free) on behalf
    of one virtual cluster. Every write is a compare-and-swap on the GlobalNode's resourceVersion, so two
    virtual clusters never hold the same node, whoever runs this module (the operator, a playbook, AWX).
  - With O(state=reserved) and O(policies) or O(select_nodes), chooses the nodes the virtual cluster should hold
    (the ones it holds already first, then free ones) and reserves them all or none. When the request cannot be
    met, nothing is reserved, the module does not fail, and RV(satisfied) is false with RV(message) saying why.
  - With O(names), moves exactly those nodes to O(state); a node held by another virtual cluster, or in a state
    the transition does not start from, fails the task and changes nothing.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  virtual_cluster:
    description: The claiming virtual cluster as C(namespace/name).
    type: str
    required: true
  state:
    description:
      - The state to move nodes to.
      - Omitted (only with O(names) and O(agent_certificates)), the nodes keep their state.
    type: str
    choices: [reserved, occupied, returning, held, free]
  names:
    description: Nodes to move. Exclusive with O(policies) and O(select_nodes).
    type: list
    elements: str
  policies:
    description:
      - C(promotePolicies) of the VirtualCluster (C(labelSelector), C(nodeCount)); only with O(state=reserved).
    type: list
    elements: dict
  select_nodes:
    description: C(promoteResources.nodes) of the VirtualCluster; only with O(state=reserved).
    type: list
    elements: str
  exclude:
    description: Nodes never to reserve, such as the node that runs the operator.
    type: list
    elements: str
    default: []
  blocked:
    description: Free nodes kept for virtual clusters that asked earlier and still wait; never reserved here.
    type: list
    elements: str
    default: []
  namespace_rules:
    description:
      - The site's rules for the namespaces of virtual clusters; the first rule that names the namespace of
        O(virtual_cluster) (or C(*)) applies to it, and each waiter of O(queue) is held to the rule of its own.
        A namespace no rule names has no limits.
      - Only with O(state=reserved) and O(policies) or O(select_nodes).
    type: list
    elements: dict
    default: []
    suboptions:
      namespaces:
        description: The namespaces the rule is for; C(*) for every namespace.
        type: list
        elements: str
        required: true
      node_selector:
        description:
          - Label selector (C(matchLabels), C(matchExpressions)) of the GlobalNodes these namespaces may take;
            others are outside their pool. Omitted, any node.
        type: dict
      max_nodes:
        description:
          - How many nodes the virtual clusters of one of these namespaces may hold in all (nodes held out of the
            pool for clearing do not count). Omitted, no limit. Nodes a virtual cluster holds already stay its own.
        type: int
      max_virtual_clusters:
        description:
          - How many VirtualClusters one of these namespaces may have; checked by the playbook before a new one
            is built, not here.
        type: int
  queue:
    description:
      - Virtual clusters that asked earlier and still wait for nodes, oldest first (the operator passes those it
        serves). Each keeps the free nodes it would take, also while it cannot be met yet, so a later request
        never takes them; adds to O(blocked).
      - Only with O(state=reserved) and O(policies) or O(select_nodes).
    type: list
    elements: dict
    default: []
    suboptions:
      virtual_cluster:
        description: The waiting virtual cluster, C(namespace/name).
        type: str
        required: true
      policies:
        description: Its promotePolicies.
        type: list
        elements: dict
      select_nodes:
        description: Its promoteResources.nodes.
        type: list
        elements: str
  protect:
    description:
      - What the host cluster itself needs, as pods by namespace and label selector (its DNS, the operator).
      - A free node is not reserved when draining it, together with the nodes already out of the host and those
        this request takes, would leave one of these pods without another Ready, schedulable host node that
        matches its nodeSelector and tolerates its taints. The reason shows in RV(message).
      - DaemonSet pods are not considered; node affinity is not evaluated.
      - Only with O(state=reserved) and O(policies) or O(select_nodes).
    type: list
    elements: dict
    default: []
    suboptions:
      namespace:
        description: Namespace of the pods.
        type: str
        required: true
      selector:
        description: Label selector of the pods (C(matchLabels), C(matchExpressions)).
        type: dict
        required: true
  agent_certificates:
    description:
      - SHA-256 fingerprints (hex) of the agent certificates to accept for the nodes in O(names), recorded in
        C(status.agent.certificateSHA256) with the transition. Connections through the
        P(kosmos.kubenest.globalnodes#inventory) inventory then refuse any other certificate the CA signed.
      - Recorded only by the virtual cluster holding the nodes (when its nodes come back and their agent
        certificate is re-issued). Only with O(names).
    type: list
    elements: str
  reason:
    description: Reason of the GlobalNode's C(Claimed) condition.
    type: str
    default: Updated
  note:
    description: Message of the GlobalNode's C(Claimed) condition.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Plans and reports the transitions without writing them.
  diff_mode:
    support: full
    description: Shows each moved node's state and holder before and after.
notes:
  - A reservation left behind by an interrupted run is kept by its virtual cluster (the next run of the same
    virtual cluster resumes with it) and is released by the operator once that virtual cluster is gone.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.attributes.action
"""

EXAMPLES = r"""
- name: Reserve the nodes a VirtualCluster asks for, all or none
  kosmos.kubenest.global_node:
    virtual_cluster: tenant-a/vc1
    state: reserved
    policies:
      - labelSelector: {matchLabels: {kubernetes.io/hostname: kn-w1}}
        nodeCount: 1
  register: claim

- name: Mark a promoted node occupied
  kosmos.kubenest.global_node:
    virtual_cluster: tenant-a/vc1
    state: occupied
    names: [kn-w1]
    reason: Promoted
    note: joined the virtual cluster

- name: Accept the re-issued agent certificate of a returning node, and the old one until it is in use
  kosmos.kubenest.global_node:
    virtual_cluster: tenant-a/vc1
    names: [kn-w1]
    agent_certificates: ["{{ old_fingerprint }}", "{{ new_fingerprint }}"]
    reason: AgentCertificateRenewal

- name: Give a node back to the pool
  kosmos.kubenest.global_node:
    virtual_cluster: tenant-a/vc1
    state: free
    names: [kn-w1]
    reason: Returned
"""

RETURN = r"""
satisfied:
  description: Whether the request can be met (always true with O(names)).
  returned: always
  type: bool
assigned:
  description: Nodes the virtual cluster holds for its request after this call (reserved or occupied).
  returned: when O(state=reserved) with O(policies) or O(select_nodes)
  type: list
  elements: str
added:
  description: Nodes this call reserved (or would reserve, in check mode).
  returned: when O(state=reserved) with O(policies) or O(select_nodes)
  type: list
  elements: str
surplus:
  description: Nodes the virtual cluster holds that its request no longer asks for.
  returned: when O(state=reserved) with O(policies) or O(select_nodes)
  type: list
  elements: str
wanted:
  description: How many nodes the request asks for.
  returned: when O(state=reserved) with O(policies) or O(select_nodes)
  type: int
available:
  description: How many of them it can have now.
  returned: when O(state=reserved) with O(policies) or O(select_nodes)
  type: int
message:
  description: C("N of M nodes available"), with the reasons when the request cannot be met.
  returned: always
  type: str
moved:
  description: Nodes whose state changed (or would change).
  returned: always
  type: list
  elements: str
nodes:
  description:
    - Every node in RV(assigned) or O(names), by name - C(nodeIP), C(labels), C(state), C(virtualCluster), and
      C(agentCertificates), the SHA-256s of the agent certificates recorded for the node (empty when none is).
    - A run that reaches the nodes pins their agents to C(agentCertificates) (C(kubenest_agent_cert_sha256)).
  returned: always
  type: dict
"""
