#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: globalnode_clear
short_description: Ask the operator to clear held nodes and give them back to the pool, and wait until it has
version_added: 1.4.0
description:
  - A held node (kept out of the pool when it came back from a virtual cluster) goes back once the platform team
    has cleared it. This annotates each named GlobalNode C(kubenest.kosmos.io/clear); the operator then runs
    C(playbooks/node_clear.yml) for it with the site's settings, and removes the annotation when the run ends.
  - Every name must be a GlobalNode that is held; otherwise nothing is annotated and the task fails naming each
    that is not.
  - With O(wait), prints a line each time a node's state changes and returns once every node has left the held
    state; fails with the operator's reason (annotation C(kubenest.kosmos.io/clear-failed)) for a node whose
    clear failed, or when O(timeout) passes.
  - Runs as an action on the controller.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  names:
    description: Names of the held GlobalNodes to clear.
    type: list
    elements: str
    required: true
  wait:
    description: Wait until every node has been cleared (or its clear failed).
    type: bool
    default: true
  timeout:
    description: Seconds to wait at most; a clear wipes the node and rejoins it to the host.
    type: float
    default: 1800
  interval:
    description: Seconds between reads while waiting.
    type: float
    default: 5
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.attributes.action
attributes:
  check_mode:
    support: full
    description: Checks the names and says which nodes would be asked for; annotates nothing.
  diff_mode:
    support: none
    description: No diff is reported.
"""

EXAMPLES = r"""
- name: Give kn-w1 back once it has been reimaged
  kosmos.kubenest.globalnode_clear:
    names: [kn-w1]
"""

RETURN = r"""
asked:
  description: Nodes this task annotated (nodes already asked for are waited for, not asked again).
  returned: always
  type: list
  elements: str
  sample: [kn-w1]
states:
  description: Each node's state as last read.
  returned: always
  type: dict
  sample: {kn-w1: free}
waited:
  description: Seconds waited.
  returned: always
  type: float
"""
