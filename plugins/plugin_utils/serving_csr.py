# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A kubelet's serving-certificate requests approved through the controller-side REST client, with the checks of
module_utils/csr.py."""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.module_utils.csr import APPROVAL_REASON, SIGNER, check_serving_request

API_VERSION = "certificates.k8s.io/v1"
KIND = "CertificateSigningRequest"


def approve_serving_requests(api, node, ip_addresses, dns_names, check_mode=False):
    """Approve the pending kubelet-serving requests of `node` that pass the checks; {approved, issued, refused}
    as module_utils/csr.approve_serving_requests returns them."""
    result = dict(approved=[], issued=[], refused=[])
    for csr in api.list(API_VERSION, KIND):
        spec, name = csr.get("spec") or {}, csr["metadata"]["name"]
        if spec.get("signerName") != SIGNER or spec.get("username") != "system:node:%s" % node:
            continue
        conditions = (csr.get("status") or {}).get("conditions") or []
        states = [c.get("type") for c in conditions]
        if "Denied" in states or "Failed" in states:
            continue
        if "Approved" in states:
            result["issued"].append(name)
            continue
        problem = check_serving_request(spec.get("request") or "", node, spec.get("usages") or [], set(ip_addresses),
                                        set(dns_names) | {node})
        if problem:
            result["refused"].append({"name": name, "reason": problem})
            continue
        if not check_mode:
            csr["status"] = dict(csr.get("status") or {}, conditions=conditions + [{
                "type": "Approved", "status": "True", "reason": APPROVAL_REASON,
                "message": "kosmos.kubenest checked the node name and addresses"}])
            api.request("PUT", api.path(API_VERSION, KIND, name=name) + "/approval", body=csr)
        result["approved"].append(name)
    return result
