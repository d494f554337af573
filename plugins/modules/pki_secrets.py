#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: pki_secrets
short_description: Keep a whole PKI (CAs, certificates, service-account keys, kubeconfigs) in Secrets
version_added: 1.2.0
description:
  - Reads the Secrets named in O(secrets), issues every certificate of O(certificates) that is missing or due
    (the rules of M(kosmos.kubenest.certificate)), creates missing O(service_account_keys), renders
    O(kubeconfigs) from the certificates, and writes each Secret back only when its content differs, in one
    module run and without any file on disk.
  - A certificate is issued again when it is missing, unreadable, its key does not match, its subject,
    organizations, SANs or usages differ from the arguments, it is not signed by its O(certificates[].ca) (so
    a new CA re-issues everything it signs), or it is inside its renewal window (O(renew_before_days) before
    its end, never more than a third of its lifetime).
  - Every key of every Secret must be produced by this run, and everything produced must be stored, so that
    a typo cannot silently drop a credential. Keys already in a Secret but not listed are removed.
  - Secrets are created or replaced with compare-and-swap on their resourceVersion. No key material appears in
    the result.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  namespace:
    description: Namespace of the Secrets.
    type: str
    required: true
  secrets:
    description: The Secrets that hold the PKI, and the keys each holds.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Secret name.
        type: str
        required: true
      keys:
        description:
          - File-style keys, C(<certificate>.crt), C(<certificate>.key), C(<sa key>.key), C(<sa key>.pub) or a
            kubeconfig's name.
        type: list
        elements: str
        required: true
  certificates:
    description: CAs and certificates, in order; a certificate's O(certificates[].ca) comes before it.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Name of the pair; the keys are C(<name>.crt) and C(<name>.key).
        type: str
        required: true
      common_name:
        description: Subject CN.
        type: str
        required: true
      is_ca:
        description: A self-signed CA.
        type: bool
        default: false
      ca:
        description: Name of the CA (an earlier entry) that signs it. Required unless O(certificates[].is_ca=true).
        type: str
      organizations:
        description: Subject O= values (the groups of a client certificate).
        type: list
        elements: str
        default: []
      dns_names:
        description: DNS subject alternative names.
        type: list
        elements: str
        default: []
      ip_addresses:
        description: IP subject alternative names.
        type: list
        elements: str
        default: []
      usages:
        description: Extended key usages of a leaf certificate.
        type: list
        elements: str
        choices: [server, client]
        default: [client]
  service_account_keys:
    description: Names of service-account signing key pairs, kept as C(<name>.key) and C(<name>.pub).
    type: list
    elements: str
    default: []
  kubeconfigs:
    description: Client-certificate kubeconfigs rendered from the certificates.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Key of the kubeconfig.
        type: str
        required: true
      server:
        description: C(https://) URL of the API server.
        type: str
        required: true
      ca:
        description: Certificate whose C(.crt) the kubeconfig trusts.
        type: str
        required: true
      cert:
        description: Certificate (and key) the kubeconfig authenticates with.
        type: str
        required: true
      cluster_name:
        description: Cluster and context name in the kubeconfig.
        type: str
        default: kubernetes
      user_name:
        description: User name in the kubeconfig.
        type: str
        default: admin
  labels:
    description: Labels of every Secret.
    type: dict
    default: {}
  owner_references:
    description: ownerReferences of every Secret.
    type: list
    elements: dict
    default: []
  validity_days:
    description: Lifetime of leaf certificates; never beyond their CA's end.
    type: float
    default: 365
  ca_validity_days:
    description: Lifetime of CAs.
    type: float
    default: 3650
  renew_before_days:
    description: Renewal window before a certificate's end (at most a third of its lifetime).
    type: float
    default: 30
  key_type:
    description: Type of new private keys.
    type: str
    choices: [rsa, ec]
    default: rsa
attributes:
  check_mode:
    support: full
    description: Reports what would be issued and which Secrets would change, writing nothing.
  diff_mode:
    support: none
    description: Secrets are not shown.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
seealso:
  - module: kosmos.kubenest.certificate
  - module: kosmos.kubenest.secret_files
"""

EXAMPLES = r"""
- name: A CA, a server certificate and a kubeconfig, kept in two Secrets
  kosmos.kubenest.pki_secrets:
    namespace: tenants
    certificates:
      - {name: ca, is_ca: true, common_name: example-ca}
      - {name: server, ca: ca, common_name: example, usages: [server], dns_names: [example.tenants.svc]}
      - {name: admin, ca: ca, common_name: admin, organizations: ["system:masters"]}
    service_account_keys: [sa]
    kubeconfigs:
      - {name: admin.conf, server: "https://10.0.0.1:6443", ca: ca, cert: admin}
    secrets:
      - {name: example-pki, keys: [ca.crt, ca.key, server.crt, server.key, admin.crt, admin.key, sa.key, sa.pub]}
      - {name: example-admin, keys: [admin.conf]}
    labels: {app.kubernetes.io/managed-by: kosmos.kubenest}
  register: pki
"""

RETURN = r"""
certificates:
  description: Per certificate name, its SHA-256 fingerprint, end of validity and why it was (re)issued.
  returned: always
  type: dict
  sample: {ca: {sha256: 3f0c..., not_after: "2036-11-21T10:00:00+00:00", reason: unchanged}}
secrets:
  description: Per Secret name, whether it existed and whether this run changed it.
  returned: always
  type: dict
  sample: {example-pki: {found: true, changed: false}}
"""

import base64
import ipaddress

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.kosmos.kubenest.plugins.module_utils import kubeconfig as kc
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_client import (
    HAS_KUBERNETES,
    KUBECONFIG_ARGS,
    KUBERNETES_IMPORT_ERROR,
    ApiException,
    KubeClientError,
    api_client,
    describe,
)
from ansible_collections.kosmos.kubenest.plugins.module_utils.secrets import is_file_name, put_secret, read_secret


def _problems(p):
    """Every mistake in the arguments, before anything is read or written."""
    problems = []
    produced = []
    known = set()
    for cert in p["certificates"]:
        name = cert["name"]
        if not is_file_name(name):
            problems.append("certificates: %r is not a file name" % name)
        if cert["is_ca"] and cert["ca"]:
            problems.append("certificates: %s is a CA and cannot name a ca" % name)
        if not cert["is_ca"]:
            if not cert["ca"]:
                problems.append("certificates: %s needs a ca (or is_ca)" % name)
            elif cert["ca"] not in known:
                problems.append("certificates: %s names ca %r, which is not an earlier CA" % (name, cert["ca"]))
            if not cert["usages"]:
                problems.append("certificates: %s needs at least one of the usages server, client" % name)
        for ip in cert["ip_addresses"]:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                problems.append("certificates: %s: %r is not an IP address" % (name, ip))
        if cert["is_ca"]:
            known.add(name)
        produced += [name + ".crt", name + ".key"]
    for name in p["service_account_keys"]:
        produced += [name + ".key", name + ".pub"]
    names = set(c["name"] for c in p["certificates"])
    for conf in p["kubeconfigs"]:
        if not conf["server"].startswith("https://"):
            problems.append("kubeconfigs: %s: server %r must be an https:// URL" % (conf["name"], conf["server"]))
        for field in ("ca", "cert"):
            if conf[field] not in names:
                problems.append("kubeconfigs: %s: %s %r is not one of the certificates"
                                % (conf["name"], field, conf[field]))
        produced.append(conf["name"])
    duplicates = sorted(set(k for k in produced if produced.count(k) > 1))
    if duplicates:
        problems.append("produced more than once: %s" % ", ".join(duplicates))
    stored = [k for s in p["secrets"] for k in s["keys"]]
    bad = sorted(set(k for k in stored if not is_file_name(k)))
    if bad:
        problems.append("secrets: keys that are not file names: %s" % ", ".join(bad))
    unknown = sorted(set(stored) - set(produced))
    if unknown:
        problems.append("secrets: keys nothing produces: %s" % ", ".join(unknown))
    unstored = sorted(set(produced) - set(stored))
    if unstored:
        problems.append("produced but stored in no Secret: %s" % ", ".join(unstored))
    twice = sorted(set(k for k in stored if stored.count(k) > 1))
    if twice:
        problems.append("secrets: keys stored more than once: %s" % ", ".join(twice))
    return problems


def _issue(p, files):
    """Bring `files` (key -> PEM bytes, what the Secrets hold) up to date; per certificate what happened."""
    pairs = {}
    report = {}
    for cert in p["certificates"]:
        name = cert["name"]
        ca = pairs.get(cert["ca"]) if not cert["is_ca"] else None
        wanted = pki.wanted_spec(cert["common_name"], cert["organizations"], cert["dns_names"],
                                 cert["ip_addresses"], cert["usages"], cert["is_ca"])
        reason = pki.reissue_reason(files.get(name + ".crt"), files.get(name + ".key"), ca, wanted,
                                    p["renew_before_days"])
        if reason is None:
            pair = pki.CertAndKey(pki.load_certificate_pem(files[name + ".crt"]),
                                  pki.load_private_key_pem(files[name + ".key"]))
        elif cert["is_ca"]:
            pair = pki.new_ca(cert["common_name"], validity_days=p["ca_validity_days"], key_type=p["key_type"])
        else:
            pair = pki.issue_certificate(ca, cert["common_name"], organizations=cert["organizations"],
                                         dns_names=cert["dns_names"], ip_addresses=cert["ip_addresses"],
                                         server="server" in cert["usages"], client="client" in cert["usages"],
                                         validity_days=p["validity_days"], key_type=p["key_type"])
        if reason is not None:
            files[name + ".crt"] = pki.certificate_pem(pair.cert)
            files[name + ".key"] = pki.private_key_pem(pair.key)
        pairs[name] = pair
        report[name] = dict(sha256=pki.certificate_sha256(pair.cert), reason=reason or "unchanged",
                            not_after=pki.certificate_not_after(pair.cert).isoformat())
    for name in p["service_account_keys"]:
        key = None
        if files.get(name + ".key") is not None:
            try:
                key = pki.load_private_key_pem(files[name + ".key"])
            except ValueError:
                key = None
        if key is None:
            key = pki.new_service_account_key(p["key_type"])
            files[name + ".key"] = pki.private_key_pem(key)
        files[name + ".pub"] = pki.public_key_pem(key)
    for conf in p["kubeconfigs"]:
        config = kc.client_cert_kubeconfig(conf["server"], files[conf["ca"] + ".crt"], files[conf["cert"] + ".crt"],
                                           files[conf["cert"] + ".key"], cluster_name=conf["cluster_name"],
                                           user_name=conf["user_name"])
        files[conf["name"]] = kc.dump_kubeconfig(config).encode()
    return report


def run(module, k8s, core):
    p = module.params
    current = {}
    files = {}
    for secret in p["secrets"]:
        found = read_secret(core, p["namespace"], secret["name"])
        current[secret["name"]] = found
        for key, value in ((found.data or {}) if found is not None else {}).items():
            if key in secret["keys"]:
                files[key] = base64.b64decode(value)
    certificates = _issue(p, files)
    secrets = {}
    for secret in p["secrets"]:
        data = dict((key, base64.b64encode(files[key]).decode()) for key in secret["keys"])
        changed = put_secret(k8s, core, current[secret["name"]], p["namespace"], secret["name"], data, p["labels"],
                             p["owner_references"], check_mode=module.check_mode)
        secrets[secret["name"]] = dict(found=current[secret["name"]] is not None, changed=changed)
    return dict(changed=any(s["changed"] for s in secrets.values()), certificates=certificates, secrets=secrets)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            KUBECONFIG_ARGS,
            namespace=dict(type="str", required=True),
            secrets=dict(type="list", elements="dict", required=True, no_log=False, options=dict(
                name=dict(type="str", required=True),
                keys=dict(type="list", elements="str", required=True, no_log=False),
            )),
            certificates=dict(type="list", elements="dict", default=[], options=dict(
                name=dict(type="str", required=True),
                common_name=dict(type="str", required=True),
                is_ca=dict(type="bool", default=False),
                ca=dict(type="str"),
                organizations=dict(type="list", elements="str", default=[]),
                dns_names=dict(type="list", elements="str", default=[]),
                ip_addresses=dict(type="list", elements="str", default=[]),
                usages=dict(type="list", elements="str", choices=["server", "client"], default=["client"]),
            )),
            service_account_keys=dict(type="list", elements="str", default=[], no_log=False),
            kubeconfigs=dict(type="list", elements="dict", default=[], options=dict(
                name=dict(type="str", required=True),
                server=dict(type="str", required=True),
                ca=dict(type="str", required=True),
                cert=dict(type="str", required=True),
                cluster_name=dict(type="str", default="kubernetes"),
                user_name=dict(type="str", default="admin"),
            )),
            labels=dict(type="dict", default={}),
            owner_references=dict(type="list", elements="dict", default=[]),
            validity_days=dict(type="float", default=float(pki.LEAF_VALIDITY_DAYS)),
            ca_validity_days=dict(type="float", default=float(pki.CA_VALIDITY_DAYS)),
            renew_before_days=dict(type="float", default=float(pki.RENEW_BEFORE_DAYS)),
            key_type=dict(type="str", choices=["rsa", "ec"], default="rsa", no_log=False),
        ),
        supports_check_mode=True,
    )
    if not pki.HAS_CRYPTOGRAPHY:
        module.fail_json(msg=missing_required_lib("cryptography"), exception=pki.CRYPTOGRAPHY_IMPORT_ERROR)
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    problems = _problems(module.params)
    if problems:
        module.fail_json(msg="; ".join(problems))
    try:
        from kubernetes import client as k8s

        result = run(module, k8s, k8s.CoreV1Api(api_client(module.params["kubeconfig"], module.params["context"])))
    except KubeClientError as exc:
        module.fail_json(msg=str(exc))
    except ApiException as exc:
        module.fail_json(msg="Secrets in %s: API call failed: %s" % (module.params["namespace"], describe(exc)))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
