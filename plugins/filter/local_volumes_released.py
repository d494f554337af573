# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: local_volumes_released
short_description: Which local volumes of a pool wait for their claims to go, and which are ready to be wiped
version_added: 1.1.0
description:
  - Takes the PersistentVolumes of a pool made by the P(kosmos.kubenest.local_volumes#role) role (a
    kosmos.kubenest.kube_info result's C(resources)).
  - A volume is released when its claim is gone (phase C(Released)). Only volumes whose path is a pool
    directory (C(<base_dir>/vol-NNN)) are returned as released, so that a volume object made by someone else
    can never point the wipe at another directory.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The pool's PersistentVolumes.
    type: list
    elements: dict
    required: true
  base_dir:
    description: The directory that holds the pool's volumes on every node.
    type: str
    required: true
  claims:
    description: Claims (C(namespace), C(name)) just deleted; volumes still bound to them are C(pending).
    type: list
    elements: dict
    default: []
  nodes:
    description: Node objects; a released volume's entry gets its node's InternalIP as C(address).
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Volumes to wipe
  ansible.builtin.debug:
    msg: "{{ (pool.resources | kosmos.kubenest.local_volumes_released('/var/lib/kubenest/volumes')).released }}"
"""

RETURN = r"""
_value:
  description: C(pending), the names of volumes still bound to one of O(claims); C(released), a
    C({name, node, address, path, claim_uid}) per released pool volume (C(address) None when O(nodes) does not
    have it).
  type: dict
"""

import posixpath
import re

from ansible.errors import AnsibleFilterError

POOL_DIR = re.compile(r"^vol-[0-9]{3,}$")
NODE_LABEL = "kosmos.io/local-volume-node"


def _pool_path(path, base_dir):
    if not isinstance(path, str) or posixpath.normpath(path) != path:
        return None
    parent, leaf = posixpath.split(path)
    return path if parent == base_dir and POOL_DIR.match(leaf) else None


def _internal_ips(nodes):
    found = {}
    for node in nodes or []:
        for address in (node.get("status") or {}).get("addresses") or []:
            if address.get("type") == "InternalIP" and address.get("address"):
                found.setdefault((node.get("metadata") or {}).get("name"), address["address"])
    return found


def local_volumes_released(volumes, base_dir, claims=None, nodes=None):
    if not isinstance(base_dir, str) or not base_dir.startswith("/") or posixpath.normpath(base_dir) != base_dir:
        raise AnsibleFilterError("local_volumes_released: base_dir must be a normalized absolute path, got %r"
                                 % (base_dir,))
    wanted = {(c.get("namespace"), c.get("name")) for c in claims or []}
    addresses = _internal_ips(nodes)
    pending, released = [], []
    for pv in volumes or []:
        spec, meta = pv.get("spec") or {}, pv.get("metadata") or {}
        ref = spec.get("claimRef") or {}
        phase = (pv.get("status") or {}).get("phase")
        if phase == "Bound" and (ref.get("namespace"), ref.get("name")) in wanted:
            pending.append(meta.get("name"))
            continue
        path = _pool_path((spec.get("local") or {}).get("path"), base_dir)
        node = (meta.get("labels") or {}).get(NODE_LABEL)
        if phase == "Released" and path and node and ref.get("uid"):
            released.append({"name": meta["name"], "node": node, "address": addresses.get(node), "path": path,
                             "claim_uid": ref["uid"]})
    return {"pending": sorted(pending), "released": sorted(released, key=lambda v: v["name"])}


class FilterModule:
    def filters(self):
        return {"local_volumes_released": local_volumes_released}
