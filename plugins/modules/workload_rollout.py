#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: workload_rollout
short_description: Wait until a workload is rolled out, failing fast when its pods cannot start
version_added: 1.1.0
description:
  - Polls the workload until the controller has seen its latest spec and every replica runs that spec and is
    ready (available, for a Deployment). For a DaemonSet, every node its controller chose runs a ready pod of
    the latest template; with O(on_every_node), that must also be as many nodes as the cluster has.
  - Meanwhile looks at the workload's pods and fails as soon as one cannot start, with the pod's own reason
    and message; no amount of waiting would help. Those are C(ImagePullBackOff), C(InvalidImageName),
    C(ErrImageNeverPull), C(CreateContainerConfigError) and C(CreateContainerError); C(CrashLoopBackOff)
    once a container restarted O(crash_restarts) times; and C(Unschedulable) once the scheduler has found no
    node for O(unschedulable_after) seconds. Where the scheduler blames taints, the message names each node's
    taint the pod does not tolerate (a disk under pressure, a control-plane node).
  - Otherwise fails after O(timeout) seconds, saying what the workload's status shows.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  kind:
    description: The workload's kind.
    type: str
    choices: [Deployment, StatefulSet, DaemonSet]
    required: true
  name:
    description: The workload's name.
    type: str
    required: true
  namespace:
    description: The workload's namespace.
    type: str
    required: true
  timeout:
    description: Seconds to wait in all.
    type: int
    default: 300
  crash_restarts:
    description: Restarts of one container in a crash loop after which the wait gives up.
    type: int
    default: 2
  unschedulable_after:
    description: Seconds a pod may stay unschedulable before the wait gives up.
    type: int
    default: 15
  reachable_url:
    description:
      - An C(http://) or C(https://) URL that must answer 200 as well before the wait ends, such as an API
        server's C(/readyz) at the address its clients use (a NodePort answers only once the ready pod is
        behind it).
      - Tried whenever the workload is rolled out, every 0.1 s, each attempt for at most 2 s. This checks
        reachability only, the way its clients come, so its certificate is not checked (they pin their CA)
        and no proxy is used.
    type: str
  on_every_node:
    description:
      - For a DaemonSet that runs on every node, such as a pod network's agent. Its controller counts a node
        that has just joined only a moment later, so a rollout status alone can end the wait too soon.
      - Only with O(kind=DaemonSet).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Looks once without waiting; a workload that is not there yet is reported as not rolled out.
  diff_mode:
    support: none
    description: Nothing changes.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.attributes.action
"""

EXAMPLES = r"""
- name: Wait until etcd is ready
  kosmos.kubenest.workload_rollout:
    kind: StatefulSet
    name: vc1-etcd
    namespace: tenants
    timeout: 300

- name: Wait until the API server is rolled out and answers at its NodePort
  kosmos.kubenest.workload_rollout:
    kind: Deployment
    name: vc1-apiserver
    namespace: tenants
    reachable_url: https://192.0.2.10:31443/readyz

- name: Wait until the pod network's agent is ready on every node
  kosmos.kubenest.workload_rollout:
    kind: DaemonSet
    name: cilium
    namespace: kube-system
    on_every_node: true
"""

RETURN = r"""
rolled_out:
  description: Whether the workload is rolled out.
  returned: always
  type: bool
problem:
  description: Why a pod cannot start, as the pod's reason and message, when that ended the wait.
  returned: failure
  type: str
pod:
  description: The pod that cannot start.
  returned: failure
  type: str
reachable:
  description: Whether O(reachable_url) answered 200.
  returned: when O(reachable_url) is given
  type: bool
ready:
  description: Ready pods of the workload at the last look (C(readyReplicas), or C(numberReady) of a DaemonSet).
  returned: success, and when the wait timed out
  type: int
  version_added: 1.4.0
waited:
  description: Seconds waited.
  returned: always
  type: float
"""
