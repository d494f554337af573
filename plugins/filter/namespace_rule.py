# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: namespace_rule
short_description: The site's rule for a namespace of virtual clusters
version_added: 1.1.0
description:
  - The first rule of the list that names the namespace, or C(*); an empty dict when none does (no limits).
  - A rule - C(namespaces), C(node_selector) (the GlobalNodes they may take), C(max_nodes) (nodes their virtual
    clusters may hold in all), C(max_virtual_clusters). See the C(namespace_rules) option of
    M(kosmos.kubenest.global_node).
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The site's rules (C(kubenest_namespace_rules)).
    type: list
    elements: dict
    required: true
  namespace:
    description: The namespace of the virtual cluster.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The rule of this virtual cluster's namespace
  ansible.builtin.set_fact:
    rule: "{{ kubenest_namespace_rules | kosmos.kubenest.namespace_rule(virtualcluster.namespace) }}"
"""

RETURN = r"""
_value:
  description: The rule, or an empty dict.
  type: dict
"""

from ansible_collections.kosmos.kubenest.plugins.module_utils.globalnodes import namespace_rule


class FilterModule:
    def filters(self):
        return {"namespace_rule": namespace_rule}
