#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: secret_files
short_description: Keep the files of a directory in a Secret, and write them back
version_added: 1.1.0
description:
  - With O(state=restored), writes every key of the Secret O(namespace)/O(name) as a file of O(directory)
    (mode 0600, atomically); a missing Secret writes nothing. Idempotent generators such as
    M(kosmos.kubenest.certificate) then see what exists and keep it.
  - With O(state=stored), reads O(files) from O(directory) and makes them the Secret's data, creating the
    Secret or replacing its data, labels and ownerReferences when they differ (compare-and-swap on
    resourceVersion). Keys not in O(files) are dropped.
  - One module run per Secret, whatever the number of files. File contents never appear in the result.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  name:
    description: Secret name.
    type: str
    required: true
  namespace:
    description: Secret namespace.
    type: str
    required: true
  directory:
    description: Directory the files are written to or read from (it must exist).
    type: path
    required: true
  state:
    description: V(restored) writes the Secret's keys as files; V(stored) writes the files into the Secret.
    type: str
    choices: [restored, stored]
    required: true
  files:
    description: With O(state=stored), the file names to store (the Secret's keys).
    type: list
    elements: str
    default: []
  labels:
    description: With O(state=stored), the Secret's labels.
    type: dict
    default: {}
  owner_references:
    description: With O(state=stored), the Secret's ownerReferences.
    type: list
    elements: dict
    default: []
attributes:
  check_mode:
    support: full
    description: Reports what would be written without writing it.
  diff_mode:
    support: none
    description: Secrets are not shown.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
"""

EXAMPLES = r"""
- name: Bring back the PKI of an earlier run
  kosmos.kubenest.secret_files:
    name: vc1-pki
    namespace: tenants
    directory: "{{ workdir.path }}"
    state: restored

- name: Keep it
  kosmos.kubenest.secret_files:
    name: vc1-pki
    namespace: tenants
    directory: "{{ workdir.path }}"
    state: stored
    files: [ca.crt, ca.key]
    labels: {kosmos.io/virtualcluster: vc1}
"""

RETURN = r"""
found:
  description: Whether the Secret existed before this run.
  returned: always
  type: bool
keys:
  description: Keys written as files (O(state=restored)) or stored in the Secret (O(state=stored)).
  returned: always
  type: list
  elements: str
"""

import base64
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kosmos.kubenest.plugins.module_utils.files import is_file_name, write_atomic
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import (
    KUBECONFIG_ARGS,
    ConfigError,
    KubeApiError,
    connect,
)
from ansible_collections.kosmos.kubenest.plugins.module_utils.secrets import put_secret, read_secret


def restore(module, api, p):
    secret = read_secret(api, p["namespace"], p["name"])
    data = (secret.get("data") or {}) if secret is not None else {}
    bad = sorted(k for k in data if not is_file_name(k))
    if bad:
        module.fail_json(msg="Secret %s/%s has keys that are not file names: %s" % (p["namespace"], p["name"], bad))
    if not module.check_mode:
        for key, value in data.items():
            write_atomic(os.path.join(p["directory"], key), base64.b64decode(value), 0o600)
    return dict(changed=bool(data), found=secret is not None, keys=sorted(data))


def store(module, api, p):
    bad = sorted(f for f in p["files"] if not is_file_name(f))
    if bad:
        module.fail_json(msg="files: not file names: %s" % bad)
    missing = sorted(f for f in p["files"] if not os.path.isfile(os.path.join(p["directory"], f)))
    if missing:
        module.fail_json(msg="files missing in %s: %s" % (p["directory"], ", ".join(missing)))
    data = {}
    for name in p["files"]:
        with open(os.path.join(p["directory"], name), "rb") as fh:
            data[name] = base64.b64encode(fh.read()).decode()
    secret = read_secret(api, p["namespace"], p["name"])
    changed = put_secret(api, secret, p["namespace"], p["name"], data, p["labels"], p["owner_references"],
                         check_mode=module.check_mode)
    return dict(changed=changed, found=secret is not None, keys=sorted(data))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            KUBECONFIG_ARGS,
            name=dict(type="str", required=True),
            namespace=dict(type="str", required=True),
            directory=dict(type="path", required=True),
            state=dict(type="str", required=True, choices=["restored", "stored"]),
            files=dict(type="list", elements="str", default=[]),
            labels=dict(type="dict", default={}),
            owner_references=dict(type="list", elements="dict", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not os.path.isdir(p["directory"]):
        module.fail_json(msg="directory %s does not exist" % p["directory"])
    try:
        api = connect(p["kubeconfig"], p["context"], p["request_timeout"])
        try:
            result = restore(module, api, p) if p["state"] == "restored" else store(module, api, p)
        finally:
            api.close()
    except ConfigError as exc:
        module.fail_json(msg=str(exc))
    except KubeApiError as exc:
        module.fail_json(msg="Secret %s/%s: API call failed: %s" % (p["namespace"], p["name"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
