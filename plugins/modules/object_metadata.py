#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: object_metadata
short_description: List the metadata of several kinds of objects in a namespace, in one run
version_added: 1.2.0
description:
  - For each entry of O(queries), lists the objects of that kind in O(namespace) (optionally by label selector
    and by name) and returns only their metadata, which the API server sends as
    C(PartialObjectMetadataList), so that the content of Secrets never leaves the API server.
  - The result has the shape of a registered M(kosmos.kubenest.kube_info) loop (C(results), each with C(item)
    and C(resources)), so that filters written for such loops read it unchanged, e.g.
    P(kosmos.kubenest.ownership#filter).
  - Read-only; one task instead of one per kind.
  - Runs as an action on the controller, so a task costs its requests only.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  namespace:
    description: Namespace to list in.
    type: str
    required: true
  queries:
    description: What to list; each entry comes back as the C(item) of its result.
    type: list
    elements: dict
    required: true
    suboptions:
      api_version:
        description: C(group/version), or C(v1) for the core group.
        type: str
        required: true
      kind:
        description: Kind, as in the objects' C(kind).
        type: str
        required: true
      names:
        description: Only objects with one of these names (all when absent).
        type: list
        elements: str
      label_selector:
        description: Label selector, as C(kubectl -l) takes it.
        type: str
  owner:
    description:
      - The virtual cluster every object found must belong to, as P(kosmos.kubenest.ownership#filter) decides it.
        When an object belongs to someone else, the task fails with C([kubenest:permanent:NotOwned]) and names
        the objects in RV(foreign).
      - Unset, nothing is checked.
    type: dict
    version_added: 1.4.0
    suboptions:
      name:
        description: Name of the VirtualCluster.
        type: str
        required: true
      uid:
        description: Its uid; empty for a run with no VirtualCluster object behind it (labels decide then).
        type: str
        default: ""
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.attributes.action
  - kosmos.kubenest.attributes.read_only
"""

EXAMPLES = r"""
- name: Objects a virtual cluster would write
  kosmos.kubenest.object_metadata:
    namespace: tenants
    queries:
      - {api_version: v1, kind: Secret, names: [vc1-pki, vc1-etcd-pki]}
      - {api_version: apps/v1, kind: Deployment, label_selector: "kosmos.io/virtualcluster=vc1"}
  register: listed

- name: Refuse to go on if any of them belongs to someone else
  kosmos.kubenest.object_metadata:
    namespace: tenants
    queries:
      - {api_version: v1, kind: Secret, names: [vc1-pki, vc1-etcd-pki]}
    owner: {name: vc1, uid: "{{ vc_uid }}"}

- name: Say which are someone else's
  ansible.builtin.debug:
    msg: "{{ (listed.results | kosmos.kubenest.ownership({'name': 'vc1', 'uid': vc_uid})).foreign }}"
"""

RETURN = r"""
results:
  description: One entry per query, in order.
  returned: always
  type: list
  elements: dict
  contains:
    item:
      description: The query.
      type: dict
    resources:
      description: The objects found, each C({apiVersion, kind, metadata}).
      type: list
      elements: dict
foreign:
  description: C(Kind namespace/name) of each object found that does not belong to O(owner).
  returned: when O(owner) is given
  type: list
  elements: str
  sample: ["Secret tenants/vc1-pki"]
"""
