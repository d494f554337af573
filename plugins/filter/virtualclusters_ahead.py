# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: virtualclusters_ahead
short_description: The VirtualClusters of a namespace that came before one of them
version_added: 1.1.0
description:
  - Names of the listed VirtualClusters created before the one named (by creation time, then name), leaving out
    those being deleted; all of them when the one named is not listed (it comes after every one that exists).
  - A cap on VirtualClusters per namespace (C(max_virtual_clusters) of a namespace rule) lets the first ones stay.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: VirtualCluster objects of one namespace.
    type: list
    elements: dict
    required: true
  name:
    description: The VirtualCluster whose place is asked for.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The virtual clusters of the namespace that came before this one
  ansible.builtin.set_fact:
    ahead: "{{ listed.resources | kosmos.kubenest.virtualclusters_ahead(virtualcluster.name) }}"
"""

RETURN = r"""
_value:
  description: Their names, oldest first.
  type: list
  elements: str
"""


def virtualclusters_ahead(virtualclusters, name):
    """Names of the VirtualClusters that came before `name` (by creation time, then name), none being deleted:
    those a cap on VirtualClusters per namespace lets stay first. Listed objects only: one not yet created
    comes after all of them."""
    def key(vc):
        meta = vc.get("metadata") or {}
        return (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))

    alive = sorted((vc for vc in virtualclusters or [] if not (vc.get("metadata") or {}).get("deletionTimestamp")),
                   key=key)
    names = [str((vc.get("metadata") or {}).get("name")) for vc in alive]
    return names[:names.index(name)] if name in names else names


class FilterModule:
    def filters(self):
        return {"virtualclusters_ahead": virtualclusters_ahead}
