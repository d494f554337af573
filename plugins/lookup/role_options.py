# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: role_options
short_description: The options of this collection's role entry points, as one argument spec
version_added: 1.1.0
description:
  - Reads the C(meta/argument_specs.yml) of this collection's roles and merges the options of the entry points
    named, for one M(ansible.builtin.validate_argument_spec) task at the start of a playbook.
  - Such a check fails before anything is written, and lets the playbook include the roles with
    C(rolespec_validate=false); ansible-core would otherwise re-read and re-check a role's specs on every include.
  - Top-level C(required) is dropped, since the playbook supplies those options at each include. Options keep
    their type, choices, elements and sub-options.
  - An option defined differently by two of the entry points is an error.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _terms:
    description: A role name for all of its entry points, or C(role:entry_point) for one.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Check the settings the roles of this run take, once
  ansible.builtin.validate_argument_spec:
    argument_spec: "{{ lookup('kosmos.kubenest.role_options', 'etcd:hosted', 'control_plane') }}"
"""

RETURN = r"""
_raw:
  description: One argument spec, option name to its definition.
  type: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.role_options import RoleOptionsError, merged_spec


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        try:
            return [merged_spec(terms)]
        except (RoleOptionsError, OSError) as exc:
            raise AnsibleLookupError("role_options: %s" % exc) from exc
