#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: kubeconfig
short_description: Write a kubeconfig that embeds a CA and a client certificate or a token
version_added: 1.0.0
description:
  - Renders a kubeconfig with one cluster, one user and one context, with the CA and client
    credentials embedded, and writes it atomically with mode O(mode) only when its content changes.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  dest:
    description: Where to write the kubeconfig.
    type: path
    required: true
  server:
    description: API server URL, e.g. C(https://198.18.0.11:6443).
    type: str
    required: true
  ca_file:
    description: PEM file of the CA that signed the API server certificate.
    type: path
    required: true
  cert_path:
    description: Client certificate pair, path without extension (C(.crt)/C(.key)). Exclusive with O(token).
    type: path
  token:
    description: Bearer token, e.g. a bootstrap token C(abcdef.0123456789abcdef). Exclusive with O(cert_path).
    type: str
  cluster_name:
    description: Name of the cluster entry.
    type: str
    default: kubernetes
  user_name:
    description: Name of the user entry.
    type: str
    default: admin
  mode:
    description: File mode of the kubeconfig (it holds credentials).
    type: raw
    default: "0600"
extends_documentation_fragment:
  - kosmos.kubenest.credential_files
"""

EXAMPLES = r"""
- name: Admin kubeconfig on the controller
  kosmos.kubenest.kubeconfig:
    dest: "{{ playbook_dir }}/admin.kubeconfig"
    server: https://198.18.0.11:6443
    ca_file: pki/ca.crt
    cert_path: pki/admin
"""

RETURN = r"""
dest:
  description: Path of the kubeconfig.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kosmos.kubenest.plugins.module_utils import kubeconfig as kc
from ansible_collections.kosmos.kubenest.plugins.module_utils.files import write_atomic


def _read(module, path, what):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        module.fail_json(msg="%s: cannot read %s: %s" % (what, path, exc.strerror or exc))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            server=dict(type="str", required=True),
            ca_file=dict(type="path", required=True),
            cert_path=dict(type="path"),
            token=dict(type="str", no_log=True),
            cluster_name=dict(type="str", default="kubernetes"),
            user_name=dict(type="str", default="admin"),
            mode=dict(type="raw", default="0600"),
        ),
        required_one_of=[("cert_path", "token")],
        mutually_exclusive=[("cert_path", "token")],
        supports_check_mode=True,
    )
    p = module.params
    if not p["server"].startswith("https://"):
        module.fail_json(msg="server: %r must be an https:// URL" % p["server"])
    ca_pem = _read(module, p["ca_file"], "ca_file")
    if p["token"]:
        config = kc.token_kubeconfig(p["server"], ca_pem, p["token"], cluster_name=p["cluster_name"],
                                     user_name=p["user_name"])
    else:
        config = kc.client_cert_kubeconfig(p["server"], ca_pem, _read(module, p["cert_path"] + ".crt", "cert_path"),
                                           _read(module, p["cert_path"] + ".key", "cert_path"),
                                           cluster_name=p["cluster_name"], user_name=p["user_name"])
    content = kc.dump_kubeconfig(config).encode()
    dest = p["dest"]
    current = None
    if os.path.exists(dest):
        with open(dest, "rb") as fh:
            current = fh.read()
    changed = current != content
    if changed and not module.check_mode:
        directory = os.path.dirname(dest) or "."
        if not os.path.isdir(directory):
            module.fail_json(msg="dest: directory %s does not exist" % directory)
        write_atomic(dest, content, 0o600)
    file_args = module.load_file_common_arguments(dict(path=dest, mode=p["mode"]))
    if os.path.exists(dest):
        changed = module.set_fs_attributes_if_different(file_args, changed)
    module.exit_json(changed=changed, dest=dest)


if __name__ == "__main__":
    main()
