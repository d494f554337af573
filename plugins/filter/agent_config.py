# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: agent_config
short_description: The node agent's config.toml from a dictionary
version_added: 1.2.0
description:
  - Renders the settings of C(kubenest-agent serve) as TOML, every value escaped as data, so that a node name or
    client identity from an inventory can never add a setting of its own.
  - Keys are written in sorted order; a key whose value is V(None) is left out.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: Setting names and values (strings, integers, booleans or lists of strings).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Agent configuration
  vars:
    agent_settings: {listen: "0.0.0.0:7443", allowed_clients: [kubenest-controller]}
  ansible.builtin.copy:
    content: "{{ agent_settings | kosmos.kubenest.agent_config }}"
    dest: /etc/kubenest-agent/config.toml
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The TOML document, ending in a newline.
  type: str
"""

import json
import re

from ansible.errors import AnsibleFilterError

KEY_RE = re.compile(r"^[a-z][a-z0-9_]*$")
HEADER = "# Written by kosmos.kubenest (role agent): changes are overwritten on the next run.\n"


def _value(key, value):
    # A JSON string is a valid TOML basic string: the same quote and escapes.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return "[%s]" % ", ".join(json.dumps(item) for item in value)
    raise AnsibleFilterError("agent_config: %s must be a string, integer, boolean or list of strings, not %s"
                             % (key, type(value).__name__))


def agent_config(settings):
    if not isinstance(settings, dict):
        raise AnsibleFilterError("agent_config: expected a dictionary of settings, got %s" % type(settings).__name__)
    lines = [HEADER]
    for key in sorted(settings):
        if not isinstance(key, str) or not KEY_RE.match(key):
            raise AnsibleFilterError("agent_config: %r is not a setting name" % (key,))
        if settings[key] is not None:
            lines.append("%s = %s\n" % (key, _value(key, settings[key])))
    return "".join(lines)


class FilterModule:
    def filters(self):
        return {"agent_config": agent_config}
