# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: konnectivity_manifests
short_description: The Konnectivity tunnel of a virtual cluster, built as data
version_added: 1.2.0
description:
  - C(egress) - the hosted API server's egress selector configuration (cluster traffic to the proxy server beside
    it, over a Unix socket).
  - C(tenant) - what the tenant cluster gets - the binding that lets the proxy server review tokens, the agents'
    ServiceAccount and their DaemonSet.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: C(egress) or C(tenant).
    type: str
    required: true
  settings:
    description:
      - For C(tenant) - C(image) (the agent's), C(server_host) and C(server_port) (where the agents reach the
        proxy server, the tenant endpoint's address and the Service's C(konnectivity) NodePort), C(resources).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The agents in the tenant
  kosmos.kubenest.kube_apply:
    kubeconfig: /tmp/tenant.kubeconfig
    definition: >-
      {{ 'tenant' | kosmos.kubenest.konnectivity_manifests({'image': 'kubenest.local/konnectivity-agent:v0',
                                                            'server_host': '198.18.0.11', 'server_port': 31132}) }}
"""

RETURN = r"""
_value:
  description: The configuration (C(egress)) or the objects (C(tenant)).
  type: raw
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.module_utils import run_result
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import konnectivity
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.node_network import known_settings

TENANT_SETTINGS = ("image", "server_host", "server_port", "resources")


def konnectivity_manifests(what, settings):
    try:
        known_settings(settings, TENANT_SETTINGS)
        if what == "egress":
            return konnectivity.egress_selector_config(konnectivity.UDS_NAME)
        if what != "tenant":
            raise ValueError("%r is neither egress nor tenant" % (what,))
        missing = sorted(set(TENANT_SETTINGS) - {"resources"} - set(settings))
        if missing:
            raise ValueError("missing settings %s" % ", ".join(missing))
        return konnectivity.server_rbac() + konnectivity.agent_objects(**settings)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(run_result.permanent("InvalidRequest", "konnectivity: %s" % exc)) from None


class FilterModule:
    def filters(self):
        return {"konnectivity_manifests": konnectivity_manifests}
