# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: etcd_restore_chunks
short_description: Names of the Secrets that carry a snapshot into a restored virtual cluster's etcd
version_added: 1.1.0
description:
  - The Secrets C(<name>-etcd-restore-000), C(-001), ... that kosmos.kubenest.etcd_restore writes and from which
    the init container of each etcd member joins the snapshot.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: Number of chunks; 0 for none.
    type: int
    required: true
  vc_name:
    description: Name of the virtual cluster.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The chunk Secrets of a restored virtual cluster
  ansible.builtin.debug:
    msg: "{{ 3 | kosmos.kubenest.etcd_restore_chunks('alpha') }}"
"""

RETURN = r"""
_value:
  description: The Secret names, in the order the snapshot is joined.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.module_utils.etcd_backup_file import MAX_CHUNKS, restore_chunk_names


def etcd_restore_chunks(chunks, vc_name):
    try:
        count = int(chunks)
    except (TypeError, ValueError):
        raise AnsibleFilterError("etcd_restore_chunks: a number of chunks, got %r" % (chunks,)) from None
    if not 0 <= count <= MAX_CHUNKS:
        raise AnsibleFilterError("etcd_restore_chunks: 0 to %d chunks, got %d" % (MAX_CHUNKS, count))
    return restore_chunk_names(vc_name, count)


class FilterModule:
    def filters(self):
        return {"etcd_restore_chunks": etcd_restore_chunks}
