# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: ownership
short_description: Which host objects a virtual cluster owns, and which it must not touch
version_added: 1.1.0
description:
  - Takes the results of a kosmos.kubenest.kube_info loop over C({api_version, kind, names}) items and sorts the
    objects found. An object belongs to a virtual cluster when it has an owner reference to that
    VirtualCluster (same name and uid); for runs without a VirtualCluster object (no uid), when no other
    controller owns it and it carries the collection's labels for that virtual cluster.
  - Runs refuse to update objects they do not own (a planted Secret must not become the tenant's CA) and
    deletion removes only owned objects.
  - Returns references only, never object content, so Secrets listed to decide stay out of logs.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The C(results) of a k8s_info loop; each item's C(item) has C(api_version), C(kind) and
      optionally C(names) (only objects with these names are looked at).
    type: list
    elements: dict
    required: true
  virtualcluster:
    description: The virtual cluster (C(name), and C(uid) when a VirtualCluster object is behind the run).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Objects in the way
  ansible.builtin.debug:
    msg: "{{ (listed.results | kosmos.kubenest.ownership(virtualcluster)).foreign }}"
"""

RETURN = r"""
_value:
  description: C(owned), a C({api_version, kind, namespace, name}) per owned object, and C(foreign), a
    C(Kind namespace/name) per object that belongs to someone else.
  type: dict
"""

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.ownership import classify


def ownership(results, virtualcluster):
    virtualcluster = virtualcluster or {}
    listings = [((r.get("item") or {}), r.get("resources") or []) for r in results or []]
    return classify(listings, virtualcluster.get("name"), virtualcluster.get("uid") or "")


class FilterModule:
    def filters(self):
        return {"ownership": ownership}
