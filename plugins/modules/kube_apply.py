#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: kube_apply
short_description: Server-side apply or delete Kubernetes objects, from the controller
version_added: 1.3.0
description:
  - Applies each object of O(definition) with server-side apply (field manager C(kosmos.kubenest), conflicts
    forced), or deletes it with O(state=absent).
  - Objects are applied in three waves, up to four requests at once within a wave. First Namespaces,
    CustomResourceDefinitions, NetworkPolicies and PriorityClasses; last the workloads (Deployments,
    StatefulSets, DaemonSets, ReplicaSets, Pods, Jobs, CronJobs); everything else between them. A workload's
    pods therefore start with their configuration, identity and policies in place.
  - O(state=patched) sends O(definition) as a JSON merge patch to the one object named by O(kind) and O(name)
    (C(null) removes a field), or with O(patch_type=json) as a JSON patch (RFC 6902), whose C(test) operations
    make the whole patch fail when the object is not as expected; an object that does not exist is no change,
    with an empty RV(result).
  - Runs as an action on the controller and needs no Python package beyond what Ansible has; no module process
    starts, so a task costs its requests only.
  - The objects are sent as data; nothing in them is read as a template or parsed from text.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  definition:
    description:
      - One object, or a list of objects, each with C(apiVersion), C(kind) and C(metadata.name); a C(List) (kind
        C(List) with C(items), as C(kubectl) writes several objects in one document) stands for its items.
      - With O(state=patched), the merge patch.
    type: raw
  api_version:
    description: C(group/version) of the object named by O(kind) and O(name).
    type: str
    default: v1
  kind:
    description: Kind of the object to delete or patch (O(state=absent) or O(state=patched)).
    type: str
  name:
    description: Name of the object to delete or patch (O(state=absent) or O(state=patched)).
    type: str
  namespace:
    description: Namespace for namespaced objects that name none.
    type: str
  state:
    description:
      - V(present) applies, V(absent) deletes (an object that is already gone is no change), V(patched) merges
        O(definition) into one existing object.
    type: str
    choices: [present, absent, patched]
    default: present
  patch_type:
    description:
      - With O(state=patched), V(merge) sends O(definition) (one mapping) as a JSON merge patch, V(json) (a list
        of operations) as a JSON patch.
    type: str
    choices: [merge, json]
    default: merge
  wait:
    description: With O(state=absent), wait until the objects are gone (finalizers done).
    type: bool
    default: false
  wait_timeout:
    description: Seconds O(wait) waits.
    type: float
    default: 120
  field_manager:
    description: Field manager the applied fields belong to.
    type: str
    default: kosmos.kubenest
  force_conflicts:
    description: Take over fields another manager set, as the owner of these objects should.
    type: bool
    default: true
  label_selectors:
    description: With O(state=absent) and O(kind), delete every object these label selectors all match.
    type: list
    elements: str
    default: []
  propagation:
    description: What happens to the dependents of a deleted object.
    type: str
    choices: [Background, Foreground, Orphan]
    default: Background
attributes:
  check_mode:
    support: full
    description: Sends the requests as server-side dry runs.
  diff_mode:
    support: none
    description: No diff.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.attributes.action
notes:
  - Kubeconfig users that authenticate through an exec or auth-provider plugin are refused; use a client
    certificate or a token.
"""

EXAMPLES = r"""
- name: A ConfigMap and its Service account
  kosmos.kubenest.kube_apply:
    namespace: tenants
    definition:
      - {apiVersion: v1, kind: ServiceAccount, metadata: {name: vc1}}
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: vc1}, data: {answer: "42"}}

- name: Delete a Secret and wait until it is gone
  kosmos.kubenest.kube_apply:
    kind: Secret
    name: vc1-old
    namespace: tenants
    state: absent
    wait: true
"""

RETURN = r"""
result:
  description:
    - The object as the server stored it (or would, in check mode), when O(definition) holds one object.
    - Empty with O(state=absent), and with O(state=patched) when the object does not exist.
  returned: always
  type: dict
objects:
  description: The applied objects in the order of O(definition).
  returned: always
  type: list
  elements: dict
"""
