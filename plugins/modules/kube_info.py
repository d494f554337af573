#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: kube_info
short_description: Read Kubernetes objects, and optionally wait for a condition, from the controller
version_added: 1.3.0
description:
  - Reads one object by O(name), or lists objects by namespace and selectors.
  - With O(wait), reads again until the named object exists and, with O(wait_condition), until every object
    read has that status condition; fails naming the objects that did not get there.
  - Runs as an action on the controller, so a task costs its requests only.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  api_version:
    description: C(group/version), or C(v1) for the core group.
    type: str
    default: v1
  kind:
    description: Kind of the objects.
    type: str
    required: true
  name:
    description: Name of the one object to read.
    type: str
  namespace:
    description: Namespace to read in (all namespaces when a namespaced kind is listed without one).
    type: str
  label_selectors:
    description: Label selectors, all of which must match.
    type: list
    elements: str
    default: []
  field_selectors:
    description: Field selectors, all of which must match.
    type: list
    elements: str
    default: []
  wait:
    description: Read again until the conditions above hold, or fail after O(wait_timeout).
    type: bool
    default: false
  wait_condition:
    description: A status condition every object read must have.
    type: dict
    suboptions:
      type:
        description: Condition type.
        type: str
        required: true
      status:
        description: Condition status.
        type: str
        choices: ["True", "False", "Unknown"]
        default: "True"
      reason:
        description: Condition reason, when it matters.
        type: str
  wait_timeout:
    description: Seconds O(wait) waits.
    type: float
    default: 120
  wait_sleep:
    description: Seconds between reads while waiting.
    type: float
    default: 1
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.attributes.action
  - kosmos.kubenest.attributes.read_only
"""

EXAMPLES = r"""
- name: Wait until every node is Ready
  kosmos.kubenest.kube_info:
    kind: Node
    wait: true
    wait_condition: {type: Ready}
    wait_timeout: 300

- name: The etcd StatefulSet, if there is one
  kosmos.kubenest.kube_info:
    api_version: apps/v1
    kind: StatefulSet
    name: vc1-etcd
    namespace: tenants
  register: etcd_sts
"""

RETURN = r"""
resources:
  description: The objects read, each with its C(apiVersion) and C(kind).
  returned: always
  type: list
  elements: dict
"""
