#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: issue_certificate
short_description: Issue a new key and leaf certificate from a CA on the controller, in memory
version_added: 1.4.0
description:
  - Signs a new leaf certificate with the CA pair C(<ca_path>.crt) and C(<ca_path>.key) on the controller and
    returns it with its new private key as PEM text. Nothing is written; put the pair where it belongs with
    the next tasks (for example M(ansible.builtin.copy) with C(content)).
  - Every call issues a new pair. For a pair on disk that is kept and renewed, use M(kosmos.kubenest.certificate).
  - Runs as an action on the controller, so a task starts no module process.
  - The result holds a private key. Set C(no_log) on the task.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  ca_path:
    description: Path (without extension) of the signing CA pair on the controller.
    type: path
    required: true
  validity_days:
    description: Lifetime of the certificate (never longer than its CA's). May be fractional.
    type: float
    default: 365
  key_type:
    description: RSA (2048 bits) or EC (P-256) key.
    type: str
    choices: [rsa, ec]
    default: rsa
attributes:
  check_mode:
    support: full
    description: Writes nothing in either mode, so it issues in check mode too.
  diff_mode:
    support: none
    description: Writes nothing.
extends_documentation_fragment:
  - kosmos.kubenest.certificate_subject
  - kosmos.kubenest.attributes.action
"""

EXAMPLES = r"""
- name: New agent key and certificate from the agents' CA
  kosmos.kubenest.issue_certificate:
    ca_path: /etc/kubenest/agent-ca
    common_name: node-1
    dns_names: [node-1]
    ip_addresses: [198.18.0.12]
    usages: [server]
  register: agent_pair
  no_log: true

- name: Install the key
  ansible.builtin.copy:
    content: "{{ agent_pair.private_key }}"
    dest: /etc/kubenest/agent/node.key
    mode: "0600"
  no_log: true
"""

RETURN = r"""
certificate:
  description: The certificate, PEM.
  returned: success
  type: str
private_key:
  description: Its private key, PEM (PKCS#8, unencrypted).
  returned: success
  type: str
sha256:
  description: SHA-256 fingerprint of the certificate's DER form, lowercase hex.
  returned: success
  type: str
not_after:
  description: End of validity, ISO 8601.
  returned: success
  type: str
"""
