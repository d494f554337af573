#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_drain
short_description: Cordon a node and evict its pods, from the controller
version_added: 1.4.0
description:
  - Marks the Node unschedulable and evicts its pods through the Eviction API, so PodDisruptionBudgets are
    respected; an eviction a budget refuses is asked again every O(wait_sleep) seconds until O(timeout), as
    C(kubectl drain) does.
  - Mirror (static) pods and DaemonSet pods stay. Finished pods are evicted. Pods without a controller and pods
    with C(emptyDir) data are refused unless O(force) or O(delete_emptydir_data) allow them; a refusal
    changes nothing, not even the cordon.
  - With O(wait), waits until every evicted pod is gone (its grace period over and the kubelet done with it).
    Without it, returns once the evictions are accepted; a later run with O(wait) evicts nothing again and only
    waits, so other work can happen while the pods end.
  - Runs as an action on the controller, so a task costs its requests only.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  name:
    description: The Node.
    type: str
    required: true
  wait:
    description: Wait until the evicted pods are gone.
    type: bool
    default: true
  timeout:
    description: Seconds for the whole drain (refused evictions and the wait); the task fails after them.
    type: float
    default: 120
  wait_sleep:
    description: Seconds between attempts and reads.
    type: float
    default: 1
  force:
    description: Also delete pods no controller would recreate.
    type: bool
    default: false
  delete_emptydir_data:
    description: Also evict pods whose C(emptyDir) volumes are lost with them.
    type: bool
    default: false
  without_room:
    description:
      - What to do while a disruption budget refuses an eviction and no other node could take a replacement
        (every other node is cordoned or not Ready, as when all of a cluster's nodes leave at once).
      - V(wait) asks again until O(timeout), as C(kubectl drain) does. V(delete) deletes those pods at once
        (their grace period kept), since no replacement can become ready for the budget to allow it.
    type: str
    choices: [wait, delete]
    default: wait
    version_added: 1.4.0
attributes:
  check_mode:
    support: full
    description: Reports the pods that would be evicted; cordons and evicts nothing.
  diff_mode:
    support: none
    description: No diff.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.attributes.action
"""

EXAMPLES = r"""
- name: Cordon and evict, without waiting for the pods to end
  kosmos.kubenest.node_drain:
    name: worker-3
    wait: false
    delete_emptydir_data: true

- name: Later, wait until they are gone
  kosmos.kubenest.node_drain:
    name: worker-3
    delete_emptydir_data: true
    timeout: 120
"""

RETURN = r"""
evicted:
  description: The pods evicted (or found terminating from an earlier eviction), as C(namespace/name).
  returned: always
  type: list
  elements: str
left:
  description: The mirror and DaemonSet pods left on the node, as C(namespace/name).
  returned: always
  type: list
  elements: str
deleted_without_room:
  description: The pods deleted rather than evicted under O(without_room=delete), as C(namespace/name).
  returned: always
  type: list
  elements: str
waited:
  description: Seconds spent evicting and waiting.
  returned: always
  type: float
"""
