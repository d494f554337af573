# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: catalog_refs
short_description: The image names containerd lists for archives of the image catalog
version_added: 1.4.0
description:
  - For archive names of the image catalog (C(<name>.oci.tar) with its C(<name>.oci.tar.json) beside it, as
    M(kosmos.kubenest.node_promote) delivers them), the image name each is imported under. Archives without a
    description are left out.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: Archive names, without C(.oci.tar).
    type: list
    elements: str
    required: true
  images_dir:
    description: The catalog directory on the controller.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: The names a promoted node keeps
  ansible.builtin.set_fact:
    kept: "{{ ['kube-proxy', 'coredns'] | kosmos.kubenest.catalog_refs('/var/lib/kubenest/images') }}"
"""

RETURN = r"""
_value:
  description: Image names, such as C(kubenest.local/coredns:v1.13.1), in the order given.
  type: list
  elements: str
"""

from ansible_collections.kosmos.kubenest.plugins.filter.images_to_deliver import described


def catalog_refs(names, images_dir):
    refs = []
    for name in names or []:
        entry = described(images_dir, name)
        if entry is not None and entry["ref"] not in refs:
            refs.append(str(entry["ref"]))
    return refs


class FilterModule:
    def filters(self):
        return {"catalog_refs": catalog_refs}
