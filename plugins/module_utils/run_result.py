# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a playbook run tells the operator besides success or failure. The collection writes it and the operator
reads it, and both import this module.

- RESULT_KEY is the one set_stats key of a run: the `Report` play of playbooks/virtualcluster.yml writes it once
  from the facts the roles set (endpoint, kubeconfigSecret, kubernetesVersion, nodes, addons).
- A failed task's message may carry a marker:
  - `[kubenest:permanent:<Reason>] <message>`: retrying the same cannot fix it, a person must change the spec or
    the cause;
  - `[kubenest:step:<Step>]`: the step of node_promote at which a node's promotion or return failed;
  - `<workload> cannot come up: pod <pod>: <Reason>: <message>`: why workload_rollout gave up on a pod.
- RETRY_ANNOTATION goes the other way: a person who fixed a permanent failure's cause outside the spec (removed
  a conflicting object, gave the site a kubelet) changes it to have the spec run again. The operator reacts to
  it and `kubectl kubenest retry` writes it.
"""

from __future__ import annotations

import re

RESULT_KEY = "kubenest_result"
RETRY_ANNOTATION = "kubenest.kosmos.io/retry"

PERMANENT = re.compile(r"\[kubenest:permanent:([A-Za-z][A-Za-z0-9]{0,127})\]\s*(.*)", re.DOTALL)
STEP = re.compile(r"\[kubenest:step:([A-Za-z][A-Za-z0-9]{0,63})\]")
POD = re.compile(r"cannot come up: pod [a-z0-9][-a-z0-9.]*: ([A-Z][A-Za-z]{0,63}): ")
# A node step that fails only because the control plane did not come up: a consequence, never the cause.
CONSEQUENCE_STEP = "ControlPlane"


def permanent(reason, message):
    """A failure message that tells the operator not to retry: `reason` becomes the Ready condition's reason."""
    return "[kubenest:permanent:%s] %s" % (reason, message)


def step(name):
    return "[kubenest:step:%s]" % name


def pod_stuck(workload, pod, problem):
    """workload_rollout's message for a pod that cannot start; `problem` starts with its reason and a colon."""
    return "%s cannot come up: pod %s: %s" % (workload, pod, problem)
