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
  description: IP and labels of every node in RV(assigned) or O(names), by name.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.kosmos.kubenest.plugins.module_utils import globalnodes as gn
from ansible_collections.kosmos.kubenest.plugins.module_utils.host_essentials import stranded_by_drain
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_client import (
    HAS_KUBERNETES,
    KUBECONFIG_ARGS,
    KUBERNETES_IMPORT_ERROR,
    ApiException,
    KubeClientError,
    api_client,
    describe,
)
from ansible_collections.kosmos.kubenest.plugins.module_utils.selectors import SelectorError

CLAIM_ATTEMPTS = 3


def _summary(node):
    return {"state": gn.state_of(node), "virtualCluster": gn.owner_of(node),
            "agentCertificates": gn.agent_pins_of(node)}


def _facts(node):
    spec = node.get("spec") or {}
    return {"nodeIP": spec.get("nodeIP"), "labels": spec.get("labels") or {}, "state": gn.state_of(node),
            "virtualCluster": gn.owner_of(node)}


def _host_essentials(client, essentials):
    """protected(name, away) for plan_claim, from the host's Nodes and the pods of the essentials' namespaces."""
    from kubernetes import client as k8s  # present: main() checked HAS_KUBERNETES

    core = k8s.CoreV1Api(client)
    host_nodes = client.sanitize_for_serialization(core.list_node().items)
    pods = []
    for namespace in sorted(set(entry["namespace"] for entry in essentials)):
        pods.extend(client.sanitize_for_serialization(core.list_namespaced_pod(namespace).items))

    def protected(name, away):
        stranded = stranded_by_drain(name, pods, host_nodes, away, essentials)
        return "draining it would leave %s nowhere to run" % ", ".join(stranded) if stranded else None

    return protected


def main():
    module = AnsibleModule(
        argument_spec=dict(
            KUBECONFIG_ARGS,
            virtual_cluster=dict(type="str", required=True),
            state=dict(type="str", choices=["reserved", "occupied", "returning", "held", "free"]),
            names=dict(type="list", elements="str"),
            policies=dict(type="list", elements="dict"),
            select_nodes=dict(type="list", elements="str"),
            exclude=dict(type="list", elements="str", default=[]),
            blocked=dict(type="list", elements="str", default=[]),
            queue=dict(type="list", elements="dict", default=[], options=dict(
                virtual_cluster=dict(type="str", required=True),
                policies=dict(type="list", elements="dict"),
                select_nodes=dict(type="list", elements="str"),
            )),
            protect=dict(type="list", elements="dict", default=[], options=dict(
                namespace=dict(type="str", required=True),
                selector=dict(type="dict", required=True),
            )),
            agent_certificates=dict(type="list", elements="str"),
            reason=dict(type="str", default="Updated"),
            note=dict(type="str", default=""),
        ),
        mutually_exclusive=[("names", "policies"), ("names", "select_nodes")],
        required_one_of=[("state", "agent_certificates")],
        required_by={"agent_certificates": "names"},
        supports_check_mode=True,
    )
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    p = module.params
    owner = p["virtual_cluster"]
    if owner.count("/") != 1 or not all(owner.split("/")):
        module.fail_json(msg="virtual_cluster: %r must be namespace/name" % owner)
    selecting = p["policies"] is not None or p["select_nodes"] is not None
    if selecting and p["state"] != gn.RESERVED:
        module.fail_json(msg="policies and select_nodes choose nodes to reserve: use them with state=reserved")
    if not selecting and p["names"] is None:
        module.fail_json(msg="give names, or policies/select_nodes with state=reserved")
    pins = None
    if p["agent_certificates"] is not None:
        pins = sorted(set(pin.strip().lower().replace(":", "") for pin in p["agent_certificates"]))
        bad = [pin for pin in pins if len(pin) != 64 or pin.strip("0123456789abcdef")]
        if bad or not pins:
            module.fail_json(msg="agent_certificates: %s is not a list of SHA-256 fingerprints (64 hex digits)"
                             % (bad or p["agent_certificates"]))

    try:
        client = api_client(p["kubeconfig"], p["context"])
        nodes = gn.GlobalNodes(client)
        result = dict(changed=False, satisfied=True, moved=[], nodes={})
        diff = {"before": {}, "after": {}}
        if selecting:
            # Another virtual cluster may win a node between our read and our write: plan again from a fresh list.
            for attempt in range(CLAIM_ATTEMPTS):
                listed = nodes.list()
                protected = _host_essentials(client, p["protect"]) if p["protect"] else None
                queue = [w for w in p["queue"] if w["virtual_cluster"] != owner]
                blocked = gn.kept_for_queue(listed, queue, exclude=set(p["exclude"]), blocked=set(p["blocked"]),
                                            protected=protected)
                plan = gn.plan_claim(listed, owner, policies=p["policies"], names=p["select_nodes"],
                                     exclude=set(p["exclude"]), blocked=blocked, protected=protected)
                if not plan.satisfied:
                    break
                try:
                    done = nodes.reserve_all(plan.add, owner, p["reason"], p["note"] or plan.message(),
                                             check_mode=module.check_mode)
                    break
                except (gn.ClaimError, gn.Conflict):
                    if attempt == CLAIM_ATTEMPTS - 1:
                        raise
            result.update(satisfied=plan.satisfied, message=plan.message(), wanted=plan.wanted,
                          available=plan.available, added=[], assigned=[], surplus=plan.surplus)
            if plan.satisfied:
                for name, before, after in done:
                    result["moved"].append(name)
                    diff["before"][name], diff["after"][name] = _summary(before), _summary(after)
                result.update(added=plan.add, assigned=plan.assigned)
            by_name = dict((gn.name_of(n), n) for n in listed)
            result["nodes"] = dict((name, _facts(by_name[name])) for name in plan.assigned + plan.surplus)
        else:
            for name in p["names"]:
                changed, before, after = nodes.transition(name, owner, p["state"], p["reason"], p["note"],
                                                          check_mode=module.check_mode, pins=pins)
                if changed:
                    result["moved"].append(name)
                    diff["before"][name], diff["after"][name] = _summary(before), _summary(after)
                result["nodes"][name] = _facts(after)
            result["message"] = "%d node(s) %s" % (len(p["names"]), p["state"] or "with agent certificates recorded")
    except gn.ClaimError as exc:
        module.fail_json(msg=str(exc))
    except gn.Conflict as exc:
        module.fail_json(msg="GlobalNode %s changed while claiming; nothing is held, run again" % exc)
    except SelectorError as exc:
        module.fail_json(msg="policies: %s" % exc)
    except KubeClientError as exc:
        module.fail_json(msg=str(exc))
    except ApiException as exc:
        if exc.status == 404:
            module.fail_json(msg="GlobalNode not found (%s): is the kosmos.io CRD installed and the node known?"
                             % describe(exc))
        module.fail_json(msg="GlobalNode API call failed: %s" % describe(exc))
    result["changed"] = bool(result["moved"])
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
