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

import re
import secrets
import string
from datetime import datetime, timedelta, timezone

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_client import (
    HAS_KUBERNETES,
    KUBECONFIG_ARGS,
    KUBERNETES_IMPORT_ERROR,
    ApiException,
    KubeClientError,
    api_client,
    describe,
)

NAMESPACE = "kube-system"
SECRET_TYPE = "bootstrap.kubernetes.io/token"
GROUP_PREFIX = "system:bootstrappers:"
TOKEN_ID = re.compile(r"^[a-z0-9]{6}$")
ALPHABET = string.ascii_lowercase + string.digits  # the bootstrap token format: [a-z0-9]{6}.[a-z0-9]{16}
LABELS = {"app.kubernetes.io/managed-by": "kosmos.kubenest", "kosmos.io/bootstrap-token": "true"}


def _random(length):
    return "".join(secrets.choice(ALPHABET) for dummy in range(length))


def token_secret(node, token_id, token_secret_value, expiration, groups):
    """The Secret the API server's bootstrap authenticator reads (k8s.io/cluster-bootstrap/token/api)."""
    data = {
        "token-id": token_id,
        "token-secret": token_secret_value,
        "expiration": expiration,
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
    }
    if groups:
        data["auth-extra-groups"] = ",".join(groups)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": SECRET_TYPE,
        "metadata": {"name": "bootstrap-token-" + token_id, "namespace": NAMESPACE,
                     "labels": dict(LABELS, **{"kosmos.io/globalnode": node})},
        "stringData": data,
    }


def create(module, core):
    expiration = (datetime.now(timezone.utc) + timedelta(seconds=module.params["ttl"])).strftime("%Y-%m-%dT%H:%M:%SZ")
    if module.check_mode:
        return dict(changed=True, expiration=expiration)
    token_id, secret_value = _random(6), _random(16)
    core.create_namespaced_secret(NAMESPACE, token_secret(module.params["node"], token_id, secret_value, expiration,
                                                          module.params["groups"]))
    return dict(changed=True, token="%s.%s" % (token_id, secret_value), token_id=token_id, expiration=expiration)


def delete(module, core):
    if module.params["token_id"]:
        names = ["bootstrap-token-" + module.params["token_id"]]
    else:
        labels = dict(LABELS, **{"kosmos.io/globalnode": module.params["node"]})
        selector = ",".join("%s=%s" % item for item in sorted(labels.items()))
        names = [s.metadata.name for s in core.list_namespaced_secret(NAMESPACE, label_selector=selector).items]
    deleted = []
    for name in names:
        if module.check_mode:
            deleted.append(name)  # a named token may already be gone; check mode does not read it to find out
            continue
        try:
            core.delete_namespaced_secret(name, NAMESPACE)
        except ApiException as exc:
            if exc.status != 404:
                raise
        else:
            deleted.append(name)
    return dict(changed=bool(deleted), deleted=deleted)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            KUBECONFIG_ARGS,
            node=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            ttl=dict(type="int", default=600),
            groups=dict(type="list", elements="str", default=[]),
            token_id=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    params = module.params
    if params["ttl"] <= 0:
        module.fail_json(msg="ttl must be a positive number of seconds, got %d" % params["ttl"])
    bad = [g for g in params["groups"] if not g.startswith(GROUP_PREFIX) or "," in g]
    if bad:
        module.fail_json(msg="groups: each must start with %s and hold no comma: %s" % (GROUP_PREFIX, ", ".join(bad)))
    if params["token_id"] is not None and not TOKEN_ID.match(params["token_id"]):
        module.fail_json(msg="token_id must be 6 characters of [a-z0-9], got %r" % params["token_id"])
    try:
        from kubernetes import client as k8s

        core = k8s.CoreV1Api(api_client(params["kubeconfig"], params["context"]))
        result = create(module, core) if params["state"] == "present" else delete(module, core)
    except KubeClientError as exc:
        module.fail_json(msg=str(exc))
    except ApiException as exc:
        module.fail_json(msg="bootstrap token of %s (%s): API call failed: %s"
                         % (params["node"], params["state"], describe(exc)))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
