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


def approve_serving_requests(k8s, api, node, ip_addresses, dns_names, check_mode=False):
    """Approve the pending kubelet-serving requests of `node` that pass check_serving_request.

    k8s is the kubernetes.client package, api a CertificatesV1Api. Returns {approved, issued, refused}: names
    approved now, names approved earlier, and {name, reason} of requests left pending.
    """
    result = dict(approved=[], issued=[], refused=[])
    for csr in api.list_certificate_signing_request(_request_timeout=30).items:
        spec = csr.spec
        if spec.signer_name != SIGNER or spec.username != "system:node:%s" % node:
            continue
        states = [c.type for c in ((csr.status and csr.status.conditions) or [])]
        if "Denied" in states or "Failed" in states:
            continue
        if "Approved" in states:
            result["issued"].append(csr.metadata.name)
            continue
        problem = check_serving_request(spec.request, node, spec.usages or [], set(ip_addresses),
                                        set(dns_names) | {node})
        if problem:
            result["refused"].append({"name": csr.metadata.name, "reason": problem})
            continue
        if not check_mode:
            csr.status = csr.status or k8s.V1CertificateSigningRequestStatus()
            csr.status.conditions = (csr.status.conditions or []) + [k8s.V1CertificateSigningRequestCondition(
                type="Approved", status="True", reason=APPROVAL_REASON,
                message="kosmos.kubenest checked the node name and addresses")]
            api.replace_certificate_signing_request_approval(csr.metadata.name, csr, _request_timeout=30)
        result["approved"].append(csr.metadata.name)
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


def approve_client_requests(k8s, api, node, username, check_mode=False):
    """Approve the pending client-certificate requests of a kubelet bootstrapping as `username` (the one bootstrap
    token made for `node`) that ask for `node`'s identity alone; any other request of that user is denied, as the
    token's holder asked for what it may not have. Returns {approved, issued, refused} as approve_serving_requests.
    """
    result = dict(approved=[], issued=[], refused=[])
    for csr in api.list_certificate_signing_request(_request_timeout=30).items:
        spec = csr.spec
        if spec.username != username:
            continue
        states = [c.type for c in ((csr.status and csr.status.conditions) or [])]
        if "Denied" in states or "Failed" in states:
            continue
        if "Approved" in states:
            result["issued"].append(csr.metadata.name)
            continue
        if spec.signer_name != CLIENT_SIGNER:
            problem = "signer %s is not %s" % (spec.signer_name, CLIENT_SIGNER)
        else:
            problem = check_client_request(spec.request, node, spec.usages or [])
        verdict = "Denied" if problem else "Approved"
        if problem:
            result["refused"].append({"name": csr.metadata.name, "reason": problem})
        else:
            result["approved"].append(csr.metadata.name)
        if not check_mode:
            csr.status = csr.status or k8s.V1CertificateSigningRequestStatus()
            csr.status.conditions = (csr.status.conditions or []) + [k8s.V1CertificateSigningRequestCondition(
                type=verdict, status="True", reason=APPROVAL_REASON if not problem else "KubenestNotThisNode",
                message=("kosmos.kubenest checked the node name against the node returning with this token"
                         if not problem else problem))]
            api.replace_certificate_signing_request_approval(csr.metadata.name, csr, _request_timeout=30)
    return result
