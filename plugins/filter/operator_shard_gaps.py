# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: operator_shard_gaps
short_description: What is wrong with operator shards for the namespaces that hold VirtualClusters
version_added: 1.4.0
description:
  - Returns a sentence for each namespace served by two shards (both would run its virtual clusters) or by none
    (nothing would); an empty list when each is served by exactly one.
  - Patterns are matched as the operator's C(--namespace) matches them (kopf's syntax).
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The shards, as for P(kosmos.kubenest.operator_shards#filter).
    type: list
    elements: dict
    required: true
  namespaces:
    description: The namespaces to look at, e.g. those of every VirtualCluster.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse shards that leave a virtual cluster unserved or served twice
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join('; ') }}"
  vars:
    problems: "{{ shards | kosmos.kubenest.operator_shard_gaps(['team-a-dev', 'lab']) }}"
"""

RETURN = r"""
_value:
  description: One sentence per namespace with a problem.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.module_utils.operator_shards import gaps, layout


def operator_shard_gaps(shards, namespaces):
    try:
        return gaps(layout(shards), [str(namespace) for namespace in namespaces or []])
    except ValueError as exc:
        raise AnsibleFilterError("operator_shard_gaps: %s" % exc)


class FilterModule:
    def filters(self):
        return {"operator_shard_gaps": operator_shard_gaps}
