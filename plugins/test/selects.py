# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: selects
short_description: Whether a GlobalNode (or any object with labels) is selected by a label selector
version_added: 1.0.0
description:
  - True when the object's C(spec.labels) (GlobalNode) or C(metadata.labels) satisfy the selector, as in
    P(kosmos.kubenest.selector_match#filter).
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: A Kubernetes object as returned by kosmos.kubenest.kube_info.
    type: dict
    required: true
  selector:
    description: A label selector.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: GlobalNodes matching a policy
  ansible.builtin.debug:
    msg: "{{ globalnodes | select('kosmos.kubenest.selects', {'matchLabels': {'zone': 'a'}}) | list }}"
"""

RETURN = r"""
_value:
  description: Whether the object is selected.
  type: bool
"""

from ansible_collections.kosmos.kubenest.plugins.filter.selectors import selector_match


def selects(obj, selector):
    obj = obj or {}
    labels = (obj.get("spec") or {}).get("labels")
    if labels is None:
        labels = (obj.get("metadata") or {}).get("labels") or {}
    return selector_match(labels, selector)


class TestModule:
    def tests(self):
        return {"selects": selects}
