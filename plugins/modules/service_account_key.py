#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: service_account_key
short_description: Ensure the key pair that signs Kubernetes service-account tokens exists
version_added: 1.0.0
description:
  - Writes C(<path>.key) (mode C(0600)) and C(<path>.pub). The pair is used only for service-account
    tokens, never for any certificate.
  - An existing, readable pair is kept; a missing or mismatched public half is rewritten from the private key.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  path:
    description: Path of the pair without extension.
    type: path
    required: true
extends_documentation_fragment:
  - kosmos.kubenest.credential_files
  - kosmos.kubenest.credential_files.keys
"""

EXAMPLES = r"""
- name: Service-account signing key
  kosmos.kubenest.service_account_key:
    path: /etc/kubernetes/pki/sa
"""

RETURN = r"""
key:
  description: Path of the private key.
  returned: always
  type: str
public_key:
  description: Path of the public key.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from ansible_collections.kosmos.kubenest.plugins.module_utils.files import write_atomic


def main():
    module = AnsibleModule(
        argument_spec=dict(path=dict(type="path", required=True),
                           key_type=dict(type="str", choices=["rsa", "ec"], default="rsa")),
        supports_check_mode=True,
    )
    if not pki.HAS_CRYPTOGRAPHY:
        module.fail_json(msg=missing_required_lib("cryptography"), exception=pki.CRYPTOGRAPHY_IMPORT_ERROR)
    key_path, pub_path = module.params["path"] + ".key", module.params["path"] + ".pub"
    if not os.path.isdir(os.path.dirname(key_path) or "."):
        module.fail_json(msg="path: directory %s does not exist" % os.path.dirname(key_path))
    key = None
    if os.path.exists(key_path):
        try:
            with open(key_path, "rb") as fh:
                key = pki.load_private_key_pem(fh.read())
        except ValueError as exc:
            module.fail_json(msg="%s exists but is not a readable private key: %s" % (key_path, exc))
    changed = key is None
    if key is None and not module.check_mode:
        key = pki.new_service_account_key(module.params["key_type"])
        write_atomic(key_path, pki.private_key_pem(key), 0o600)
    if key is not None:
        wanted_pub = pki.public_key_pem(key)
        current_pub = None
        if os.path.exists(pub_path):
            with open(pub_path, "rb") as fh:
                current_pub = fh.read()
        if current_pub != wanted_pub:
            changed = True
            if not module.check_mode:
                write_atomic(pub_path, wanted_pub, 0o644)
    module.exit_json(changed=changed, key=key_path, public_key=pub_path)


if __name__ == "__main__":
    main()
