#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_files_read
short_description: Read several files of a node in one module run
version_added: 1.4.0
description:
  - Reads each of O(paths) and returns its content base64-encoded, as M(ansible.builtin.slurp) does for one file.
  - One module run for the whole set, where a slurp per file costs a round trip to the node each (a node reached
    through the agent, or SSH).
  - A path that does not exist is listed in RV(missing), not an error. A path that is not a regular file, cannot
    be read, or is larger than O(max_bytes) fails the module, and nothing is returned.
  - The contents may be credentials; give the task C(no_log).
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  paths:
    description: Absolute paths of the files, each given once.
    type: list
    elements: path
    required: true
  max_bytes:
    description: Largest file read; a larger one fails the module rather than filling the controller's memory.
    type: int
    default: 1048576
attributes:
  check_mode:
    support: full
    description: Reads only; the same result in check mode.
  diff_mode:
    support: none
    description: Nothing changes.
"""

EXAMPLES = r"""
- name: Read the kubelet's kubeconfig and the cluster CA
  kosmos.kubenest.node_files_read:
    paths:
      - /etc/kubernetes/kubelet.conf
      - /etc/kubernetes/pki/ca.crt
  register: kubelet_files
  no_log: true

- name: Refuse a node that never joined a cluster
  ansible.builtin.assert:
    that: "'/etc/kubernetes/kubelet.conf' not in kubelet_files.missing"
    fail_msg: the node has no kubelet kubeconfig

- name: Keep the cluster CA
  ansible.builtin.set_fact:
    cluster_ca_pem: "{{ kubelet_files.contents['/etc/kubernetes/pki/ca.crt'] | b64decode }}"
  when: "'/etc/kubernetes/pki/ca.crt' in kubelet_files.contents"
"""

RETURN = r"""
contents:
  description: Base64 content of each file found, by the path as given.
  returned: success
  type: dict
  sample: {/etc/kubernetes/pki/ca.crt: LS0tLS1CRUdJTi...}
missing:
  description: The paths that do not exist, in the order given.
  returned: success
  type: list
  elements: str
  sample: [/etc/kubernetes/kube-proxy.conf]
"""

import base64
import os
import stat

from ansible.module_utils.basic import AnsibleModule


class NodeFilesReadError(ValueError):
    pass


def check_paths(paths):
    """The request checked: absolute paths, each once."""
    for i, path in enumerate(paths):
        if not os.path.isabs(path):
            raise NodeFilesReadError("paths[%d]: %r is not an absolute path" % (i, path))
    twice = sorted({p for p in paths if paths.count(p) > 1})
    if twice:
        raise NodeFilesReadError("each path may be given once: %s" % ", ".join(twice))
    return paths


def read_all(paths, max_bytes):
    """({path: base64 content}, [missing paths])."""
    contents, missing = {}, []
    for path in paths:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            missing.append(path)
            continue
        if not stat.S_ISREG(info.st_mode):
            raise NodeFilesReadError("%s is not a regular file" % path)
        if info.st_size > max_bytes:
            raise NodeFilesReadError("%s holds %d bytes, more than max_bytes (%d)" % (path, info.st_size, max_bytes))
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:  # grew since the stat
            raise NodeFilesReadError("%s holds more than max_bytes (%d)" % (path, max_bytes))
        contents[path] = base64.b64encode(data).decode("ascii")
    return contents, missing


def main():
    module = AnsibleModule(
        argument_spec=dict(
            paths=dict(type="list", elements="path", required=True),
            max_bytes=dict(type="int", default=1048576),
        ),
        supports_check_mode=True,
    )
    try:
        if module.params["max_bytes"] < 0:
            raise NodeFilesReadError("max_bytes must not be negative, got %d" % module.params["max_bytes"])
        contents, missing = read_all(check_paths(module.params["paths"]), module.params["max_bytes"])
    except (NodeFilesReadError, OSError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, contents=contents, missing=missing)


if __name__ == "__main__":
    main()
