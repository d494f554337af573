# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: operator_admission_policy
short_description: The operator's admission policy from deploy/operator with a site's allowed registries
version_added: 1.4.0
description:
  - Returns a copy of the List of C(deploy/operator/admission-policy.yaml) whose policy lets the operator's
    service account create workloads only with images from O(registries), instead of C(kubenest.local).
  - Each registry must be a host with an optional port; anything else is refused, as the list becomes a CEL
    expression.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The List of C(deploy/operator/admission-policy.yaml).
    type: dict
    required: true
  registries:
    description: Registries (host[:port]) the operator's workloads may take images from; at least one.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The admission policy for a site's registry
  kosmos.kubenest.kube_apply:
    definition: "{{ policy | kosmos.kubenest.operator_admission_policy(['registry.example.com:5000']) }}"
"""

RETURN = r"""
_value:
  description: The List, with the variable C(allowedRegistries) of the policy set to O(registries).
  type: dict
"""

import copy
import json

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import (
    InvalidValue,
    check_image_repository,
    registry_of,
)

VARIABLE = "allowedRegistries"


def operator_admission_policy(policy, registries):
    if not isinstance(registries, list) or not registries:
        raise AnsibleFilterError("operator_admission_policy: give at least one registry (host[:port])")
    for registry in registries:
        try:
            check_image_repository(registry)
        except InvalidValue as exc:
            raise AnsibleFilterError("operator_admission_policy: %s" % exc) from None
        if registry_of(registry) != registry:
            raise AnsibleFilterError("operator_admission_policy: %r is not a registry host[:port] (no path)"
                                     % (registry,))
    if not isinstance(policy, dict) or policy.get("kind") != "List":
        raise AnsibleFilterError("operator_admission_policy: expected the List of "
                                 "deploy/operator/admission-policy.yaml")
    result = copy.deepcopy(policy)
    found = 0
    for item in result.get("items") or []:
        if item.get("kind") != "ValidatingAdmissionPolicy":
            continue
        for variable in item.get("spec", {}).get("variables") or []:
            if variable.get("name") == VARIABLE:
                # A JSON list of checked host[:port] strings is a CEL list literal.
                variable["expression"] = json.dumps([str(r) for r in registries])
                found += 1
    if not found:
        raise AnsibleFilterError("operator_admission_policy: no policy of the List has the variable %s" % VARIABLE)
    return result


class FilterModule:
    def filters(self):
        return {"operator_admission_policy": operator_admission_policy}
