# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: cert_sha256
short_description: SHA-256 fingerprint of a PEM certificate
version_added: 1.1.0
description:
  - The SHA-256 of the certificate's DER form in lowercase hex, the form in which GlobalNodes record the agent
    certificates accepted for a node (see the C(cert_sha256) option of the kosmos.kubenest.nodeagent connection).
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: A PEM certificate (the first one is used).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Fingerprint of the agent certificate read from the node
  ansible.builtin.debug:
    msg: "{{ agent_cert.content | b64decode | kosmos.kubenest.cert_sha256 }}"
"""

RETURN = r"""
_value:
  description: 64 lowercase hex digits.
  type: str
"""

import hashlib

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_bytes

try:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding
    HAS_CRYPTOGRAPHY = True
except ImportError:
    HAS_CRYPTOGRAPHY = False


def cert_sha256(pem):
    if not HAS_CRYPTOGRAPHY:
        raise AnsibleFilterError("cert_sha256 needs the Python cryptography package on the controller")
    try:
        cert = x509.load_pem_x509_certificate(to_bytes(pem))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("cert_sha256: not a PEM certificate: %s" % exc)
    return hashlib.sha256(cert.public_bytes(Encoding.DER)).hexdigest()


class FilterModule:
    def filters(self):
        return {"cert_sha256": cert_sha256}
