# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import re
import secrets
import string
from datetime import datetime, timedelta, timezone

from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction

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


class ActionModule(KubeAction):
    ARGUMENT_SPEC = dict(
        node=dict(type="str", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        ttl=dict(type="int", default=600),
        groups=dict(type="list", elements="str", default=[]),
        token_id=dict(type="str"),
    )

    def act(self, api, args, check_mode):
        if args["ttl"] <= 0:
            raise AnsibleActionFail("ttl must be a positive number of seconds, got %d" % args["ttl"])
        bad = [g for g in args["groups"] if not g.startswith(GROUP_PREFIX) or "," in g]
        if bad:
            raise AnsibleActionFail("groups: each must start with %s and hold no comma: %s"
                                    % (GROUP_PREFIX, ", ".join(bad)))
        if args["token_id"] is not None and not TOKEN_ID.match(args["token_id"]):
            raise AnsibleActionFail("token_id must be 6 characters of [a-z0-9], got %r" % args["token_id"])
        try:
            return self._create(api, args, check_mode) if args["state"] == "present" else \
                self._delete(api, args, check_mode)
        except KubeApiError as exc:
            raise AnsibleActionFail("bootstrap token of %s (%s): API call failed: %s"
                                    % (args["node"], args["state"], exc)) from None

    @staticmethod
    def _create(api, args, check_mode):
        expiration = (datetime.now(timezone.utc) + timedelta(seconds=args["ttl"])).strftime("%Y-%m-%dT%H:%M:%SZ")
        if check_mode:
            return dict(changed=True, expiration=expiration)
        token_id, secret_value = _random(6), _random(16)
        api.create(token_secret(args["node"], token_id, secret_value, expiration, args["groups"]))
        return dict(changed=True, token="%s.%s" % (token_id, secret_value), token_id=token_id, expiration=expiration)

    @staticmethod
    def _delete(api, args, check_mode):
        if args["token_id"]:
            names = ["bootstrap-token-" + args["token_id"]]
        else:
            labels = dict(LABELS, **{"kosmos.io/globalnode": args["node"]})
            selector = ",".join("%s=%s" % item for item in sorted(labels.items()))
            names = [s["metadata"]["name"] for s in api.list("v1", "Secret", NAMESPACE, label_selector=selector)]
        deleted = []
        for name in names:
            if check_mode:
                deleted.append(name)  # a named token may already be gone; check mode does not read it to find out
            elif api.delete("v1", "Secret", name, NAMESPACE):
                deleted.append(name)
        return dict(changed=bool(deleted), deleted=deleted)
