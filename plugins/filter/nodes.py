# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: tenant_nodes
short_description: The nodes of a virtual cluster as its status reports them
version_added: 1.1.0
description:
  - For each node name, its GlobalNode address and whether the tenant's Node of that name is Ready.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: Node names.
    type: list
    elements: str
    required: true
  globalnodes:
    description: GlobalNode facts by name (C(nodeIP)), as returned by M(kosmos.kubenest.global_node).
    type: dict
    required: true
  tenant_nodes:
    description: The tenant's Node objects, as returned by kosmos.kubenest.kube_info.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Report
  ansible.builtin.debug:
    msg: "{{ ['kn-w1'] | kosmos.kubenest.tenant_nodes(claim.nodes, tenant.resources) }}"
"""

RETURN = r"""
_value:
  description: One C({name, ip, ready}) per node.
  type: list
  elements: dict
"""


def _ready(node):
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def tenant_nodes(names, globalnodes, tenant_nodes):
    by_name = dict(((n.get("metadata") or {}).get("name"), n) for n in tenant_nodes or [])
    report = []
    for name in names or []:
        facts = (globalnodes or {}).get(name) or {}
        entry = {"name": name, "ready": name in by_name and _ready(by_name[name])}
        if facts.get("nodeIP"):
            entry["ip"] = facts["nodeIP"]
        report.append(entry)
    return report


class FilterModule:
    def filters(self):
        return {"tenant_nodes": tenant_nodes}
