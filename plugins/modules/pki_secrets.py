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
    task and without any file on disk, on the controller.
  - A certificate is issued again when it is missing, unreadable, its key does not match, its subject,
    organizations, SANs or usages differ from the arguments, it is not signed by its O(certificates[].ca) (so
    a new CA re-issues everything it signs), or it is inside its renewal window (O(renew_before_days) before
    its end, never more than a third of its lifetime).
  - Every key of every Secret must be produced by this run, and everything produced must be stored, so that
    a typo cannot silently drop a credential. Keys already in a Secret but not listed are removed.
  - Secrets are created or replaced with compare-and-swap on their resourceVersion. No key material appears in
    the result.
  - A CA's C(<name>.crt) is its trust bundle, the signing CA first, and C(<name>.key) the signing key; a Secret may
    also hold C(<name>.signer.crt), the signing CA alone, for a signer that takes exactly one certificate. A
    service-account key's C(<name>.pub) holds every public key that is trusted, the signing one first.
  - O(rotations) replaces a CA or a service-account key in three steps, each run again harmlessly, with no moment
    in which something issued is not trusted. C(trust) makes a new one and adds it to the bundle, the old one still
    signs; C(sign) lets the new one sign, so every certificate it signs is issued again, and keeps the old one
    trusted; C(finish) removes the old one from the bundle. Between the steps the caller rolls out the bundle to
    everything that reads it. Meanwhile the new key waits in C(<name>.next.key) beside the signing key. A step out
    of order fails and changes nothing.
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
      kept_until_finish:
        description:
          - A certificate verified by clients the caller cannot reach, such as an API server's serving certificate
            (copies of a kubeconfig, pods that read their CA once). During a rotation of its CA it keeps the old
            CA's signature until the C(finish) step, so that those clients have from C(trust) until then to take up
            the new bundle.
        type: bool
        default: false
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
  rotations:
    description:
      - Per CA or service-account key name, the rotation step to bring it to, V(trust), V(sign) or V(finish).
        Names not given are kept as they are, also half-way through a rotation.
    type: dict
    default: {}
  rotation_id:
    description:
      - Names the rotation O(rotations) belongs to. The Secret holding an authority's key then records how far that
        rotation went (annotation C(kubenest.kosmos.io/rotation.<name>)), so that a caller repeating the steps of a
        rotation that has finished starts no new one, and steps of another rotation are refused until the one
        under way has finished.
      - 1 to 63 letters, digits, C(-), C(_) or C(.).
    type: str
    default: ""
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
  - kosmos.kubenest.attributes.action
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

- name: First step of a rotation of the CA and the service-account key (then sign, then finish)
  kosmos.kubenest.pki_secrets:
    namespace: tenants
    certificates:
      - {name: ca, is_ca: true, common_name: example-ca}
      - {name: admin, ca: ca, common_name: admin, organizations: ["system:masters"]}
    service_account_keys: [sa]
    rotations: {ca: trust, sa: trust}
    secrets:
      - {name: example-pki, keys: [ca.crt, ca.key, ca.signer.crt, admin.crt, admin.key, sa.key, sa.pub]}
"""

RETURN = r"""
certificates:
  description:
    - Per certificate name, its SHA-256 fingerprint, end of validity and why it was (re)issued.
    - A CA's also lists the fingerprints it trusts (C(trusted), the signing one first), where its rotation stands
      (C(rotation), V(none), V(trust) or V(sign)) and what this run did to it (C(rotated), empty for nothing).
  returned: always
  type: dict
  sample: {ca: {sha256: 3f0c..., not_after: "2036-11-21T10:00:00+00:00", reason: unchanged, trusted: [3f0c...],
                rotation: none, rotated: ""}}
service_account_keys:
  description: Per service-account key name, the SHA-256 of the signing public key in PEM, the same of every
    trusted one, where its rotation stands and what this run did to it.
  returned: always
  type: dict
  sample: {sa: {sha256: 9a1e..., trusted: [9a1e..., 4b2c...], rotation: trust, rotated: a new key is trusted beside it}}
also_trusted:
  description:
    - Fingerprints trusted beside the signing ones, of every CA and service-account key; empty unless a rotation
      is under way. Part of what a component's pods must be rolled for.
  returned: always
  type: list
  elements: str
  sample: []
secrets:
  description: Per Secret name, whether it existed and whether this run changed it.
  returned: always
  type: dict
  sample: {example-pki: {found: true, changed: false}}
"""
