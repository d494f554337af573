# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: selector_match
short_description: Whether a label set matches a Kubernetes label selector
version_added: 1.0.0
description:
  - Evaluates C(matchLabels) and C(matchExpressions) (C(In), C(NotIn), C(Exists), C(DoesNotExist)) the way
    the Kubernetes API does. An empty selector matches everything.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The labels (a mapping).
    type: dict
    required: true
  selector:
    description: A label selector with C(matchLabels) and/or C(matchExpressions).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Free GlobalNodes a policy could take
  ansible.builtin.set_fact:
    candidates: "{{ nodes | selectattr('spec.labels', 'defined')
                   | select('kosmos.kubenest.selects', policy.labelSelector) | list }}"
- name: One label set
  ansible.builtin.debug:
    msg: "{{ {'zone': 'a'} | kosmos.kubenest.selector_match({'matchLabels': {'zone': 'a'}}) }}"
"""

RETURN = r"""
_value:
  description: True when the labels satisfy every requirement of the selector.
  type: bool
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.module_utils.selectors import SelectorError
from ansible_collections.kosmos.kubenest.plugins.module_utils.selectors import selector_match as _match


def selector_match(labels, selector):
    try:
        return _match(labels, selector)
    except SelectorError as exc:
        raise AnsibleFilterError("selector_match: %s" % exc) from None


class FilterModule:
    def filters(self):
        return {"selector_match": selector_match}
