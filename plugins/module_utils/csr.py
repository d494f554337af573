# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a kubelet may ask for in a serving-certificate or a first client-certificate request."""

from __future__ import annotations

import base64
import ipaddress

try:
    from cryptography import x509
    from cryptography.x509.oid import NameOID
except ImportError:  # the modules report the missing library
    HAS_CRYPTOGRAPHY = False
else:
    HAS_CRYPTOGRAPHY = True

SERVER_USAGES = {"digital signature", "key encipherment", "server auth"}


def _load(request):
    """The parsed request (PEM, base64 as in the API), or why it cannot be judged."""
    try:
        pem = base64.b64decode(request) if isinstance(request, str) else request
        req = x509.load_pem_x509_csr(pem)
    except ValueError as exc:
        return "unreadable request: %s" % exc
    if not req.is_signature_valid:
        return "the request's signature does not verify"
    return req


def check_serving_request(request, node, usages, allowed_ips, allowed_dns):
    """Return why the PEM (base64, as in the API) request is not acceptable for `node`, or None."""
    req = _load(request)
    if isinstance(req, str):
        return req
    cns = [a.value for a in req.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [a.value for a in req.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    if cns != ["system:node:%s" % node] or orgs != ["system:nodes"]:
        return "subject CN=%s O=%s is not system:node:%s in system:nodes" % (cns, orgs, node)
    extra = set(usages) - SERVER_USAGES
    if extra or "server auth" not in usages:
        return "usages %s are not those of a TLS server" % sorted(usages)
    try:
        sans = req.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "no subject alternative names"
    ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    allowed = {str(ipaddress.ip_address(ip)) for ip in allowed_ips}
    if ips - allowed:
        return "addresses %s are not the node's (%s)" % (sorted(ips - allowed), ", ".join(sorted(allowed)))
    names = set(sans.get_values_for_type(x509.DNSName))
    if names - set(allowed_dns):
        return "DNS names %s are not the node's" % sorted(names - set(allowed_dns))
    if sans.get_values_for_type(x509.RFC822Name) or sans.get_values_for_type(x509.UniformResourceIdentifier):
        return "e-mail or URI names are not allowed"
    return None


SIGNER = "kubernetes.io/kubelet-serving"
APPROVAL_REASON = "KubenestNodeVerified"


API_VERSION = "certificates.k8s.io/v1"
KIND = "CertificateSigningRequest"


def _pending(api, wanted):
    """(name, spec) of each request `wanted(spec)` picks that no one decided yet, and the names approved earlier."""
    pending, issued = [], []
    for csr in api.list(API_VERSION, KIND):
        spec = csr.get("spec") or {}
        if not wanted(spec):
            continue
        states = [c.get("type") for c in (csr.get("status") or {}).get("conditions") or []]
        if "Denied" in states or "Failed" in states:
            continue
        if "Approved" in states:
            issued.append(csr["metadata"]["name"])
        else:
            pending.append(csr)
    return pending, issued


def _decide(api, csr, verdict, reason, message):
    """Add the Approved or Denied condition through the approval subresource."""
    status = csr.get("status") or {}
    csr["status"] = dict(status, conditions=(status.get("conditions") or []) + [
        {"type": verdict, "status": "True", "reason": reason, "message": message}])
    api.request("PUT", api.path(API_VERSION, KIND, name=csr["metadata"]["name"]) + "/approval", body=csr)


def approve_serving_requests(api, node, ip_addresses, dns_names, check_mode=False):
    """Approve the pending kubelet-serving requests of `node` that pass check_serving_request.

    api is a KubeApi. Returns {approved, issued, refused}: names approved now, names approved earlier, and
    {name, reason} of requests left pending.
    """
    pending, issued = _pending(api, lambda spec: spec.get("signerName") == SIGNER
                               and spec.get("username") == "system:node:%s" % node)
    result = dict(approved=[], issued=issued, refused=[])
    for csr in pending:
        spec, name = csr["spec"], csr["metadata"]["name"]
        problem = check_serving_request(spec.get("request") or "", node, spec.get("usages") or [], set(ip_addresses),
                                        set(dns_names) | {node})
        if problem:
            result["refused"].append({"name": name, "reason": problem})
            continue
        if not check_mode:
            _decide(api, csr, "Approved", APPROVAL_REASON, "kosmos.kubenest checked the node name and addresses")
        result["approved"].append(name)
    return result


def refusals(result):
    """The reasons of refused requests as one phrase ('' when none)."""
    return "; ".join("%s: %s" % (r["name"], r["reason"]) for r in result["refused"])


CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
CLIENT_USAGES = {"digital signature", "key encipherment", "client auth"}


def check_client_request(request, node, usages):
    """Return why the PEM (base64, as in the API) request is not a kubelet's client-certificate request for `node`
    alone, or None: subject CN=system:node:<node>, O=system:nodes, usages of a TLS client, no alternative names."""
    req = _load(request)
    if isinstance(req, str):
        return req
    cns = [a.value for a in req.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [a.value for a in req.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    if cns != ["system:node:%s" % node] or orgs != ["system:nodes"] or len(list(req.subject)) != 2:
        return "subject %s is not CN=system:node:%s, O=system:nodes" % (req.subject.rfc4514_string(), node)
    if set(usages) - CLIENT_USAGES or "client auth" not in usages:
        return "usages %s are not those of a TLS client" % sorted(usages)
    try:
        req.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return None
    return "a client certificate names no addresses or DNS names"


def approve_client_requests(api, node, username, check_mode=False):
    """Approve the pending client-certificate requests of a kubelet bootstrapping as `username` (the one bootstrap
    token made for `node`) that ask for `node`'s identity alone; any other request of that user is denied, as the
    token's holder asked for what it may not have. Returns {approved, issued, refused} as approve_serving_requests.
    """
    pending, issued = _pending(api, lambda spec: spec.get("username") == username)
    result = dict(approved=[], issued=issued, refused=[])
    for csr in pending:
        spec, name = csr["spec"], csr["metadata"]["name"]
        if spec.get("signerName") != CLIENT_SIGNER:
            problem = "signer %s is not %s" % (spec.get("signerName"), CLIENT_SIGNER)
        else:
            problem = check_client_request(spec.get("request") or "", node, spec.get("usages") or [])
        if problem:
            result["refused"].append({"name": name, "reason": problem})
        else:
            result["approved"].append(name)
        if not check_mode:
            if problem:
                _decide(api, csr, "Denied", "KubenestNotThisNode", problem)
            else:
                _decide(api, csr, "Approved", APPROVAL_REASON,
                        "kosmos.kubenest checked the node name against the node returning with this token")
    return result
