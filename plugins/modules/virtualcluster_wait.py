#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: virtualcluster_wait
short_description: Wait until the operator reports a VirtualCluster Ready, printing its phase and progress
version_added: 1.4.0
description:
  - Reads the VirtualCluster every O(interval) seconds until the operator has taken up its current spec
    (C(status.observedGeneration)) and reports condition C(Ready) C(True) (nodes included), or gives up on it
    (phase C(Failed)), or O(timeout) passes.
  - "While it waits it prints a line each time what the status says changes, such as
    C(tenants/alpha: Updating, 31/74 Step Kubelet, nodes 0/1), so a terminal and an AWX job's output show how
    far the work is instead of a retry count."
  - Fails with the operator's phase, reason and message when the virtual cluster failed or is not Ready in
    time, and when the object does not exist.
  - Returns the status only, as the spec may carry the tenant's kubeconfig.
  - Runs as an action on the controller.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  namespace:
    description: Namespace of the VirtualCluster.
    type: str
    required: true
  name:
    description: Name of the VirtualCluster.
    type: str
    required: true
  timeout:
    description: Seconds to wait at most.
    type: float
    default: 900
  interval:
    description: Seconds between reads.
    type: float
    default: 5
  quiet:
    description: Print nothing while waiting (for a caller that parses the playbook's output).
    type: bool
    default: false
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.attributes.read_only
  - kosmos.kubenest.attributes.action
"""

EXAMPLES = r"""
- name: Wait until tenants/alpha is Ready
  kosmos.kubenest.virtualcluster_wait:
    namespace: tenants
    name: alpha
    timeout: 1200
  register: alpha

- name: Where it answers
  ansible.builtin.debug:
    msg: "{{ alpha.status.endpoint }}"
"""

RETURN = r"""
ready:
  description: Whether the operator reports the current spec Ready.
  returned: always
  type: bool
status:
  description: The VirtualCluster's status as last read.
  returned: always
  type: dict
  sample: {phase: Completed, endpoint: "https://198.18.0.13:31443", nodesReady: 1/1}
waited:
  description: Seconds waited.
  returned: always
  type: float
"""
