# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: operator_shards
short_description: The operator's Deployment split into shards by namespace, each with its peering
version_added: 1.4.0
description:
  - Returns, for each shard, a copy of the operator's Deployment named C(kubenest-operator-<name>) that serves the
    shard's namespace patterns with a ClusterKopfPeering of its own (C(<peering>-<name>)), and those peerings.
  - The first shard does the cluster-scoped work (Nodes, GlobalNodes, clears); the others run with
    C(--no-cluster-scoped).
  - Each Deployment's selector, pod labels and anti-affinity carry the label C(kubenest.kosmos.io/shard), so the
    Deployments never select each other's pods and a shard's standby replica spreads from its own working one.
  - Fails with what is wrong when a shard has no valid name, no namespace pattern, or a name given twice.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The operator's Deployment, as the P(kosmos.kubenest.operator_deployment#filter) filter returns it.
    type: dict
    required: true
  shards:
    description:
      - The shards, in order; each a mapping with C(name) (a DNS label of at most 40 characters) and C(namespaces)
        (kopf namespace patterns, e.g. C(team-a-*) or C(!team-a-*)).
    type: list
    elements: dict
    required: true
  peering:
    description: The peering name the shards' peerings are named after.
    type: str
    default: kubenest
  budget:
    description:
      - The operator's PodDisruptionBudget (C(deploy/operator/pdb.yaml)); given, each shard gets a copy of its own
        that selects only its pods (a pod covered by two budgets cannot be evicted at all).
    type: dict
"""

EXAMPLES = r"""
- name: Two shards, the second serving every namespace the first does not
  kosmos.kubenest.kube_apply:
    definition: "{{ (deployment | kosmos.kubenest.operator_shards(shards))['deployments'] }}"
  vars:
    shards:
      - {name: team-a, namespaces: ["team-a-*"]}
      - {name: rest, namespaces: ["!team-a-*"]}
"""

RETURN = r"""
_value:
  description:
    - C(deployments), one per shard; C(peerings), the ClusterKopfPeering objects they join; C(budgets), a
      PodDisruptionBudget per shard when O(budget) is given, else none.
  type: dict
"""

import copy

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.module_utils.operator_shards import SHARD_LABEL, layout

CONTAINER = "operator"
# Arguments of the operator's manifest that a shard sets itself.
SHARD_ARGS = ("--all-namespaces", "--namespace", "-n", "--peering", "--cluster-scoped", "--no-cluster-scoped")


def _own_args(args):
    return [arg for arg in args if arg.split("=", 1)[0] not in SHARD_ARGS]


def _shard_deployment(deployment, shard, peering, cluster_scoped):
    result = copy.deepcopy(deployment)
    name = "%s-%s" % (deployment["metadata"]["name"], shard["name"])
    result["metadata"]["name"] = name
    result["metadata"].setdefault("labels", {})[SHARD_LABEL] = shard["name"]
    spec = result["spec"]
    spec["selector"].setdefault("matchLabels", {})[SHARD_LABEL] = shard["name"]
    template = spec["template"]
    template.setdefault("metadata", {}).setdefault("labels", {})[SHARD_LABEL] = shard["name"]
    pod = template["spec"]
    for term in (pod.get("affinity") or {}).get("podAntiAffinity", {}).get(
            "preferredDuringSchedulingIgnoredDuringExecution", []):
        selector = term.get("podAffinityTerm", {}).get("labelSelector", {})
        selector.setdefault("matchLabels", {})[SHARD_LABEL] = shard["name"]
    container = next((c for c in pod["containers"] if c.get("name") == CONTAINER), None)
    if container is None:
        raise AnsibleFilterError("operator_shards: the Deployment has no container named %s" % CONTAINER)
    container["args"] = (_own_args(container.get("args") or [])
                         + ["--namespace=%s" % pattern for pattern in shard["namespaces"]]
                         + ["--peering=%s" % peering]
                         + ([] if cluster_scoped else ["--no-cluster-scoped"]))
    return result


def _shard_budget(budget, shard):
    result = copy.deepcopy(budget)
    result["metadata"]["name"] = "%s-%s" % (budget["metadata"]["name"], shard["name"])
    result["metadata"].setdefault("labels", {})[SHARD_LABEL] = shard["name"]
    result["spec"]["selector"].setdefault("matchLabels", {})[SHARD_LABEL] = shard["name"]
    return result


def operator_shards(deployment, shards, peering="kubenest", budget=None):
    if not isinstance(deployment, dict) or deployment.get("kind") != "Deployment":
        raise AnsibleFilterError("operator_shards: expected the operator's Deployment")
    try:
        checked = layout(shards)
    except ValueError as exc:
        raise AnsibleFilterError("operator_shards: %s" % exc)
    if not checked:
        raise AnsibleFilterError("operator_shards: no shards given")
    if budget is not None and (not isinstance(budget, dict) or budget.get("kind") != "PodDisruptionBudget"):
        raise AnsibleFilterError("operator_shards: budget is the operator's PodDisruptionBudget")
    deployments, peerings = [], []
    for position, shard in enumerate(checked):
        name = "%s-%s" % (peering, shard["name"])
        deployments.append(_shard_deployment(deployment, shard, name, cluster_scoped=position == 0))
        peerings.append({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering",
                         "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "kosmos.kubenest",
                                                               SHARD_LABEL: shard["name"]}}})
    budgets = [_shard_budget(budget, shard) for shard in checked] if budget is not None else []
    return {"deployments": deployments, "peerings": peerings, "budgets": budgets}


class FilterModule:
    def filters(self):
        return {"operator_shards": operator_shards}
