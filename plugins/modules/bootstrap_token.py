#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: bootstrap_token
short_description: Create or delete a node's short-lived kubelet bootstrap token
version_added: 1.1.0
description:
  - Creates a bootstrap token Secret in C(kube-system) for one node's kubelet TLS bootstrap, or deletes one.
  - Needs only the C(create) and C(delete) verbs on Secrets in C(kube-system), never C(get) or C(list) of them,
    unless O(token_id) is left out on O(state=absent). The token's ID is random, so a create never collides
    with an existing Secret.
  - Run the task with C(no_log) - the return value holds the token.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  node:
    description: The node the token is for; recorded in the label C(kosmos.io/globalnode).
    type: str
    required: true
  state:
    description:
      - V(present) creates a new token, V(absent) deletes one (O(token_id)) or all of the node's.
    type: str
    choices: [present, absent]
    default: present
  ttl:
    description: Seconds until the token expires (the API server refuses it from then on).
    type: int
    default: 600
  groups:
    description: Extra groups of the token's user; each must start with C(system:bootstrappers:).
    type: list
    elements: str
    default: []
  token_id:
    description:
      - With O(state=absent), the ID of the token to delete. Without it, every token this collection made for
        O(node) is deleted, which needs C(list) on Secrets in C(kube-system).
    type: str
attributes:
  check_mode:
    support: full
    description: Reports what would change; creates and deletes nothing.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.attributes.action
"""

EXAMPLES = r"""
- name: A token for kn-w1 to join the host again
  kosmos.kubenest.bootstrap_token:
    kubeconfig: host-admin.conf
    node: kn-w1
    ttl: 600
    groups: [system:bootstrappers:kubeadm:default-node-token]
  register: join_token
  no_log: true

- name: Close the join window
  kosmos.kubenest.bootstrap_token:
    kubeconfig: host-admin.conf
    node: kn-w1
    state: absent
    token_id: "{{ join_token.token_id }}"
"""

RETURN = r"""
token:
  description: The bearer token, C(<id>.<secret>).
  returned: when O(state=present) and not in check mode
  type: str
token_id:
  description: The token's public ID.
  returned: when O(state=present) and not in check mode
  type: str
expiration:
  description: When the token expires, RFC 3339 in UTC.
  returned: when O(state=present)
  type: str
deleted:
  description: Names of the Secrets deleted (or that would be in check mode).
  returned: when O(state=absent)
  type: list
  elements: str
"""
