#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: scratch_file
short_description: A private temporary file or directory on the controller, made or removed in-process
version_added: 1.4.0
description:
  - Creates a new file (mode C(0600), holding O(content)) or directory (mode C(0700)) under the controller's
    temporary directory (C(TMPDIR)) with a name nobody can predict, and returns its path; or removes one.
  - Runs as an action on the controller, so a task starts no module process. Use it for credentials that
    controller-side tasks read from a file (a kubeconfig, a key pair on its way to a node).
  - Scratch space is not managed state. It is made in check mode too, so the tasks after it can read it,
    and making it never counts as a change. Removing it is a change when something was there.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  state:
    description: C(file) or C(directory) to create one, C(absent) to remove O(path) (a directory with its contents).
    type: str
    choices: [file, directory, absent]
    default: file
  content:
    description: What a new file holds. Set C(no_log) on the task when it is secret.
    type: str
  prefix:
    description: Start of the new name; must not hold a path separator.
    type: str
    default: kubenest-
  suffix:
    description: End of the new name; must not hold a path separator.
    type: str
    default: ''
  path:
    description: What to remove with O(state=absent). Absent already is not an error.
    type: path
attributes:
  check_mode:
    support: full
    description: Scratch space is made and removed in check mode too.
  diff_mode:
    support: none
    description: Scratch space has nothing to compare.
extends_documentation_fragment:
  - kosmos.kubenest.attributes.action
"""

EXAMPLES = r"""
- name: The tenant's kubeconfig in a private file for the API-side tasks
  kosmos.kubenest.scratch_file:
    prefix: kubenest-tenant-
    suffix: .kubeconfig
    content: "{{ tenant_secret.resources[0].data.kubeconfig | b64decode }}"
  register: tenant_kubeconfig
  no_log: true

- name: Remove it
  kosmos.kubenest.scratch_file:
    path: "{{ tenant_kubeconfig.path }}"
    state: absent
"""

RETURN = r"""
path:
  description: The file or directory made or removed.
  returned: always
  type: str
"""
