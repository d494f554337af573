#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: promotion_step
short_description: Enter a step of a node's promotion or return
version_added: 1.4.0
description:
  - Sets the fact C(node_promote_step) to O(name), which progress reports and failure messages name; the
    kosmos.kubenest.node_promote role enters each of its steps with it.
  - With O(fault_step) equal to O(name), the task fails on entry (C([kubenest:fault] ...)) instead, for the
    rollback and resume tests. A failed task's facts are not set, so the step is also returned as RV(step) for
    a rescue to read from C(ansible_failed_result).
  - Runs as an action on the controller and contacts no host.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  name:
    description: The step entered, for example C(Drain) or C(Kubelet).
    type: str
    required: true
  fault_step:
    description: A step to fail on entry; empty in normal use.
    type: str
    default: ''
attributes:
  check_mode:
    support: full
    description: The fact is set in check mode too.
  diff_mode:
    support: none
    description: Nothing to compare.
extends_documentation_fragment:
  - kosmos.kubenest.attributes.action
"""

EXAMPLES = r"""
- name: Step Kubelet
  kosmos.kubenest.promotion_step:
    name: Kubelet
    fault_step: "{{ node_promote_fault_step }}"
"""

RETURN = r"""
step:
  description: The step entered.
  returned: always
  type: str
  sample: Kubelet
"""
