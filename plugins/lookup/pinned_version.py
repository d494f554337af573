# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: pinned_version
short_description: A component version pinned by this collection
version_added: 1.1.0
description:
  - Reads the collection's C(versions.env), the one place that pins component versions (Kubernetes, etcd,
    CoreDNS, Cilium, the pause image). Role defaults take their versions from here.
  - A term C(kubernetes) reads C(KUBERNETES_VERSION); any case works.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _terms:
    description: Component names, such as C(kubernetes), C(etcd), C(coredns), C(cilium), C(pause).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Use the Cilium version the collection was tested with
  ansible.builtin.set_fact:
    cilium_version: "{{ lookup('kosmos.kubenest.pinned_version', 'cilium') }}"
"""

RETURN = r"""
_raw:
  description: The versions, one per term.
  type: list
  elements: str
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

VERSIONS_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "versions.env")


def read_pins(path=VERSIONS_FILE):
    pins = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                pins[key.strip()] = value.strip()
    return pins


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        try:
            pins = read_pins()
        except OSError as exc:
            raise AnsibleLookupError("pinned_version: cannot read %s: %s" % (VERSIONS_FILE, exc))
        out = []
        for term in terms:
            key = "%s_VERSION" % str(term).upper().replace("-", "_")
            if key not in pins:
                names = sorted(k[:-len("_VERSION")].lower() for k in pins if k.endswith("_VERSION"))
                raise AnsibleLookupError("pinned_version: no pin for %r (pinned: %s)" % (term, ", ".join(names)))
            out.append(pins[key])
        return out
