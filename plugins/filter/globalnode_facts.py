# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: globalnode_facts
short_description: What a run needs of each GlobalNode to reach its node, by name
version_added: 1.1.0
description:
  - For GlobalNode objects (as M(kosmos.kubenest.kube_info) lists them), the same facts per node as the C(nodes)
    M(kosmos.kubenest.global_node) returns - C(nodeIP), C(labels), C(state), C(virtualCluster) and
    C(agentCertificates), the SHA-256s of the agent certificates recorded for the node.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: GlobalNode objects.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: The held nodes, as a claim reports them
  ansible.builtin.set_fact:
    nodes: "{{ held_globalnodes | kosmos.kubenest.globalnode_facts }}"
"""

RETURN = r"""
_value:
  description: Node name -> its facts.
  type: dict
"""

from ansible_collections.kosmos.kubenest.plugins.module_utils.globalnodes import name_of, node_facts


def globalnode_facts(globalnodes):
    return dict((name_of(node), node_facts(node)) for node in globalnodes or [])


class FilterModule:
    def filters(self):
        return {"globalnode_facts": globalnode_facts}
