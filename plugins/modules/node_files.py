#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_files
short_description: Several directories and files on a node, in one module run
version_added: 1.4.0
description:
  - Makes sure each of O(directories) exists with its mode, then that each of O(files) holds its content with its
    mode, written atomically (readers see the old file or the new one) and only when it differs.
  - One module run for the whole set, where a task per file costs a round trip to the node each (a node reached
    through the agent, or SSH).
  - File contents never appear in the result.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  directories:
    description: Directories to create (with their parents) or to give their mode, in this order.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path of the directory.
        type: path
        required: true
      mode:
        description: Octal mode, such as V(0700).
        type: str
        default: '0755'
  files:
    description: Files to write, after the directories; each one's directory must exist.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path of the file.
        type: path
        required: true
      content:
        description: What the file holds (text).
        type: str
        required: true
      mode:
        description: Octal mode, such as V(0644).
        type: str
        default: '0644'
attributes:
  check_mode:
    support: full
    description: Reports what would change without changing it.
  diff_mode:
    support: none
    description: Contents may be credentials; they are not shown.
"""

EXAMPLES = r"""
- name: The kubelet's directories, CA and configuration
  kosmos.kubenest.node_files:
    directories:
      - {path: /etc/kubernetes/pki, mode: "0700"}
      - {path: /var/lib/kubelet, mode: "0700"}
    files:
      - {path: /etc/kubernetes/pki/ca.crt, content: "{{ ca_pem }}"}
      - {path: /var/lib/kubelet/config.yaml, content: "{{ kubelet_config | to_nice_json }}"}
"""

RETURN = r"""
changed_paths:
  description: The directories and files created or changed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/kubernetes/pki/ca.crt]
"""

import os
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kosmos.kubenest.plugins.module_utils.files import write_atomic


class NodeFilesError(ValueError):
    pass


def parse_mode(value, where):
    text = str(value).strip()
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o7777:
        raise NodeFilesError("%s: mode %r is not an octal file mode such as 0644" % (where, value))
    return mode


def _absolute(path, where):
    if not os.path.isabs(path):
        raise NodeFilesError("%s: %r is not an absolute path" % (where, path))
    return os.path.normpath(path)


def plan(directories, files):
    """The checked request: [(path, mode)] of directories and [(path, bytes, mode)] of files."""
    dirs = [(_absolute(d["path"], "directories[%d]" % i), parse_mode(d["mode"], "directories[%d]" % i))
            for i, d in enumerate(directories)]
    out = []
    for i, f in enumerate(files):
        where = "files[%d]" % i
        out.append((_absolute(f["path"], where), str(f["content"]).encode("utf-8"), parse_mode(f["mode"], where)))
    paths = [p for p, _m in dirs] + [p for p, _c, _m in out]
    twice = sorted({p for p in paths if paths.count(p) > 1})
    if twice:
        raise NodeFilesError("each path may be given once: %s" % ", ".join(twice))
    return dirs, out


def _mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def converge(dirs, files, check_mode):
    """Paths created or changed (or that would be)."""
    changed = []
    for path, mode in dirs:
        if os.path.isdir(path):
            if _mode_of(path) != mode:
                changed.append(path)
                if not check_mode:
                    os.chmod(path, mode)
            continue
        if os.path.lexists(path):
            raise NodeFilesError("%s exists and is not a directory" % path)
        changed.append(path)
        if not check_mode:
            os.makedirs(path, mode=mode, exist_ok=True)
            os.chmod(path, mode)  # makedirs' mode is filtered by the umask
    for path, data, mode in files:
        parent = os.path.dirname(path)
        if os.path.lexists(path) and not os.path.isfile(path):
            raise NodeFilesError("%s exists and is not a regular file" % path)
        if not os.path.isdir(parent) and not (check_mode and parent in {p for p, _m in dirs}):
            raise NodeFilesError("%s: directory %s does not exist" % (path, parent))
        current = None
        if os.path.isfile(path):
            with open(path, "rb") as handle:
                current = handle.read()
        if current != data:
            changed.append(path)
            if not check_mode:
                write_atomic(path, data, mode)
        elif _mode_of(path) != mode:
            changed.append(path)
            if not check_mode:
                os.chmod(path, mode)
    return changed


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                mode=dict(type="str", default="0755"),
            )),
            files=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                content=dict(type="str", required=True, no_log=True),
                mode=dict(type="str", default="0644"),
            )),
        ),
        supports_check_mode=True,
    )
    try:
        dirs, files = plan(module.params["directories"], module.params["files"])
        changed = converge(dirs, files, module.check_mode)
    except (NodeFilesError, OSError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=bool(changed), changed_paths=changed)


if __name__ == "__main__":
    main()
