#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: certificate
short_description: Ensure a Kubernetes CA or certificate and its key exist as PEM files
version_added: 1.0.0
description:
  - Creates a self-signed CA, or a certificate signed by a CA, as C(<path>.crt) and C(<path>.key), with
    Python C(cryptography) (never the openssl CLI).
  - Idempotent; a certificate is re-issued only when its subject, organizations, SANs or usages differ
    from the arguments, it is not signed by O(ca_path), its key does not match, or it is inside its renewal
    window, which is O(renew_before_days) before its end but never more than a third of its lifetime.
  - Keys are written with mode C(0600); files are replaced atomically.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  path:
    description: Path of the pair without extension; C(.crt) and C(.key) are appended.
    type: path
    required: true
  ca_path:
    description: Path (without extension) of the signing CA pair. Required unless O(is_ca=true).
    type: path
  is_ca:
    description: Create a self-signed certificate authority.
    type: bool
    default: false
  validity_days:
    description:
      - Lifetime of a new certificate (never longer than its CA's). Defaults to 3650 for a CA, 365 otherwise.
      - May be fractional, for short-lived certificates.
    type: float
  renew_before_days:
    description:
      - Re-issue a certificate that expires within this many days, or within a third of its lifetime when
        that is shorter. May be fractional.
    type: float
    default: 30
extends_documentation_fragment:
  - kosmos.kubenest.credential_files
  - kosmos.kubenest.credential_files.keys
  - kosmos.kubenest.certificate_subject
"""

EXAMPLES = r"""
- name: Cluster CA
  kosmos.kubenest.certificate:
    path: /etc/kubernetes/pki/ca
    is_ca: true
    common_name: kubernetes-ca

- name: API server serving certificate
  kosmos.kubenest.certificate:
    path: /etc/kubernetes/pki/apiserver
    ca_path: /etc/kubernetes/pki/ca
    common_name: kube-apiserver
    usages: [server]
    dns_names: [kubernetes, kubernetes.default, kubernetes.default.svc]
    ip_addresses: [198.19.128.1, 198.18.0.11]
"""

RETURN = r"""
cert:
  description: Path of the certificate.
  returned: always
  type: str
key:
  description: Path of the private key.
  returned: always
  type: str
reason:
  description: Why the certificate was (re)issued, or C(unchanged).
  returned: always
  type: str
  sample: subject alternative names differ
not_after:
  description: End of validity of the certificate now on disk (or that would be), ISO 8601.
  returned: always
  type: str
sha256:
  description:
    - SHA-256 fingerprint of the certificate now on disk, lowercase hex; empty in check mode when it would change.
    - A digest of the fingerprints of a set of certificates changes exactly when one of them is re-issued.
  returned: always
  type: str
"""

import ipaddress
import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from ansible_collections.kosmos.kubenest.plugins.module_utils.files import write_atomic


def _read(path):
    with open(path, "rb") as fh:
        return fh.read()


def _read_if_present(path):
    return _read(path) if os.path.exists(path) else None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            ca_path=dict(type="path"),
            is_ca=dict(type="bool", default=False),
            common_name=dict(type="str", required=True),
            organizations=dict(type="list", elements="str", default=[]),
            dns_names=dict(type="list", elements="str", default=[]),
            ip_addresses=dict(type="list", elements="str", default=[]),
            usages=dict(type="list", elements="str", choices=["server", "client"], default=["client"]),
            validity_days=dict(type="float"),
            renew_before_days=dict(type="float", default=pki.RENEW_BEFORE_DAYS),
            key_type=dict(type="str", choices=["rsa", "ec"], default="rsa"),
        ),
        required_if=[("is_ca", False, ("ca_path",))],
        mutually_exclusive=[("is_ca", "ca_path")],
        supports_check_mode=True,
    )
    if not pki.HAS_CRYPTOGRAPHY:
        module.fail_json(msg=missing_required_lib("cryptography"), exception=pki.CRYPTOGRAPHY_IMPORT_ERROR)
    p = module.params
    for ip in p["ip_addresses"]:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            module.fail_json(msg="ip_addresses: %r is not an IP address" % ip)
    if not p["is_ca"] and not p["usages"]:
        module.fail_json(msg="usages: a leaf certificate needs at least one of server, client")
    cert_path, key_path = p["path"] + ".crt", p["path"] + ".key"
    directory = os.path.dirname(cert_path) or "."
    if not os.path.isdir(directory):
        module.fail_json(msg="path: directory %s does not exist" % directory)

    ca = None
    if p["ca_path"]:
        try:
            ca = pki.CertAndKey(pki.load_certificate_pem(_read(p["ca_path"] + ".crt")),
                                pki.load_private_key_pem(_read(p["ca_path"] + ".key")))
        except (OSError, ValueError) as exc:
            module.fail_json(msg="ca_path: cannot load the CA pair %s.crt/.key: %s" % (p["ca_path"], exc))
        if not pki.certificate_spec(ca.cert)["is_ca"]:
            module.fail_json(msg="ca_path: %s.crt is not a CA certificate" % p["ca_path"])

    wanted = pki.wanted_spec(p["common_name"], p["organizations"], p["dns_names"], p["ip_addresses"], p["usages"],
                             p["is_ca"])
    reason = pki.reissue_reason(_read_if_present(cert_path), _read_if_present(key_path), ca, wanted,
                                p["renew_before_days"])
    if reason is None:
        cert = pki.load_certificate_pem(_read(cert_path))
        module.exit_json(changed=False, cert=cert_path, key=key_path, reason="unchanged",
                         not_after=pki.certificate_not_after(cert).isoformat(), sha256=pki.certificate_sha256(cert))
    if module.check_mode:
        module.exit_json(changed=True, cert=cert_path, key=key_path, reason=reason, not_after="", sha256="")

    days = p["validity_days"] or (pki.CA_VALIDITY_DAYS if p["is_ca"] else pki.LEAF_VALIDITY_DAYS)
    if p["is_ca"]:
        pair = pki.new_ca(p["common_name"], validity_days=days, key_type=p["key_type"])
    else:
        pair = pki.issue_certificate(ca, p["common_name"], organizations=p["organizations"],
                                     dns_names=p["dns_names"], ip_addresses=p["ip_addresses"],
                                     server="server" in p["usages"], client="client" in p["usages"],
                                     validity_days=days, key_type=p["key_type"])
    # key first: a crash between the two writes leaves a mismatch that the next run repairs
    write_atomic(key_path, pki.private_key_pem(pair.key), 0o600)
    write_atomic(cert_path, pki.certificate_pem(pair.cert), 0o644)
    module.exit_json(changed=True, cert=cert_path, key=key_path, reason=reason,
                     not_after=pki.certificate_not_after(pair.cert).isoformat(),
                     sha256=pki.certificate_sha256(pair.cert))


if __name__ == "__main__":
    main()
