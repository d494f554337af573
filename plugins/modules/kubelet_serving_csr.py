#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: kubelet_serving_csr
short_description: Approve a kubelet's serving-certificate request after checking what it asks for
version_added: 1.1.0
description:
  - No built-in controller approves C(kubernetes.io/kubelet-serving) CertificateSigningRequests. This module
    approves the pending ones of one node, and only those asking for what that node may have, namely requested by
    C(system:node:<node>), subject C(CN=system:node:<node>, O=system:nodes), DNS names within O(dns_names),
    IP addresses within O(ip_addresses), usages for a TLS server. Anything else is left pending and reported in
    RV(refused); the task fails when the node has no acceptable request (see O(require)).
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  require:
    description: Fail when no request of the node is approved or already issued.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reports which requests would be approved.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.kube_client.serving_csr
"""

EXAMPLES = r"""
- name: Approve kn-w1's serving certificate
  kosmos.kubenest.kubelet_serving_csr:
    kubeconfig: tenant-admin.conf
    node: kn-w1
    ip_addresses: [198.18.0.12]
  register: csr
  until: csr is succeeded
  retries: 20
  delay: 1
"""

RETURN = r"""
approved:
  description: Requests this call approved.
  returned: always
  type: list
  elements: str
issued:
  description: Requests of the node approved earlier.
  returned: always
  type: list
  elements: str
refused:
  description: Requests left pending, with the reason.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.kosmos.kubenest.plugins.module_utils.csr import (
    HAS_CRYPTOGRAPHY,
    approve_serving_requests,
    refusals,
)
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import (
    KUBECONFIG_ARGS,
    ConfigError,
    KubeApiError,
    connect,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            KUBECONFIG_ARGS,
            node=dict(type="str", required=True),
            ip_addresses=dict(type="list", elements="str", default=[]),
            dns_names=dict(type="list", elements="str", default=[]),
            require=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    if not HAS_CRYPTOGRAPHY:
        module.fail_json(msg=missing_required_lib("cryptography"))
    p = module.params
    node = p["node"]
    result = dict(changed=False, approved=[], issued=[], refused=[])
    try:
        api = connect(p["kubeconfig"], p["context"], p["request_timeout"])
        try:
            result.update(approve_serving_requests(api, node, p["ip_addresses"], p["dns_names"], module.check_mode))
        finally:
            api.close()
    except ConfigError as exc:
        module.fail_json(msg=str(exc), **result)
    except KubeApiError as exc:
        module.fail_json(msg="CertificateSigningRequest API call failed: %s" % exc, **result)
    result["changed"] = bool(result["approved"])
    if p["require"] and not (result["approved"] or result["issued"]):
        why = refusals(result)
        module.fail_json(msg="no acceptable kubelet-serving request from %s yet%s" % (node, ": " + why if why else ""),
                         **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
