#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: kubelet_client_csr
short_description: Approve a bootstrapping kubelet's client certificate for its own node name only
version_added: 1.4.0
description:
  - A kubelet that bootstraps with a token asks for its first client certificate
    (signer C(kubernetes.io/kube-apiserver-client-kubelet)). A group bound for automatic approval gets one for any
    node name, so whoever holds the token may become any node. This module is the approval instead, for a token
    whose groups nothing approves automatically. It approves the pending requests made with the token O(token_id)
    only when they ask for C(CN=system:node:<node>, O=system:nodes) with the usages of a TLS client and no
    alternative names, and denies every other request made with that token, reporting it in RV(refused).
  - Fails when the token has no acceptable request (see O(require)); run it with C(until) while the kubelet
    starts.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  node:
    description: The node's name, the only identity the certificate may carry.
    type: str
    required: true
  token_id:
    description: Public ID of the bootstrap token made for the node; its requests come from
      C(system:bootstrap:<token_id>).
    type: str
    required: true
  require:
    description: Fail when no request of the token is approved or already issued.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reports which requests would be approved and which denied.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
"""

EXAMPLES = r"""
- name: Approve kn-w1's host client certificate, asked for with the token made for it
  kosmos.kubenest.kubelet_client_csr:
    kubeconfig: host-admin.conf
    node: kn-w1
    token_id: "{{ token.token_id }}"
  register: csr
  until: csr is succeeded
  retries: 60
  delay: 2
"""

RETURN = r"""
approved:
  description: Requests this call approved.
  returned: always
  type: list
  elements: str
issued:
  description: Requests of the token approved earlier.
  returned: always
  type: list
  elements: str
refused:
  description: Requests of the token denied now, with the reason.
  returned: always
  type: list
  elements: dict
"""

import re

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.kosmos.kubenest.plugins.module_utils.csr import (
    HAS_CRYPTOGRAPHY,
    approve_client_requests,
    refusals,
)
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import (
    KUBECONFIG_ARGS,
    ConfigError,
    KubeApiError,
    connect,
)

TOKEN_ID = re.compile(r"^[a-z0-9]{6}$")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            KUBECONFIG_ARGS,
            node=dict(type="str", required=True),
            token_id=dict(type="str", required=True),
            require=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    if not HAS_CRYPTOGRAPHY:
        module.fail_json(msg=missing_required_lib("cryptography"))
    p = module.params
    node, token_id = p["node"], p["token_id"]
    if not TOKEN_ID.match(token_id):
        module.fail_json(msg="token_id %r is not a bootstrap token ID (6 characters a-z or 0-9)" % token_id)
    result = dict(changed=False, approved=[], issued=[], refused=[])
    try:
        api = connect(p["kubeconfig"], p["context"], p["request_timeout"])
        try:
            result.update(approve_client_requests(api, node, "system:bootstrap:%s" % token_id, module.check_mode))
        finally:
            api.close()
    except ConfigError as exc:
        module.fail_json(msg=str(exc), **result)
    except KubeApiError as exc:
        module.fail_json(msg="CertificateSigningRequest API call failed: %s" % exc, **result)
    result["changed"] = bool(result["approved"] or result["refused"])
    if p["require"] and not (result["approved"] or result["issued"]):
        why = refusals(result)
        module.fail_json(msg="no client-certificate request for %s made with its bootstrap token yet%s (is its "
                         "kubelet running, and may the token's group create CertificateSigningRequests, bound to "
                         "ClusterRole system:node-bootstrapper?)" % (node, ": denied " + why if why else ""), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
