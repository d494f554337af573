# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import time

from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.module_utils.csr import (
    HAS_CRYPTOGRAPHY,
    approve_serving_requests,
    refusals,
)
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction

POLL_S = 0.5


def _internal_ips(node):
    return [a.get("address") for a in (node.get("status") or {}).get("addresses") or []
            if a.get("type") == "InternalIP"]


class _Admission:
    def __init__(self, api, args, check_mode):
        self.api, self.p, self.check_mode = api, args, check_mode
        self.deadline = time.monotonic() + args["timeout"]
        self.result = dict(changed=False, approved=[], issued=[], refused=[], labels_changed=False)

    def poll(self, probe):
        """probe() until it returns something true or time is up (check mode: once)."""
        while True:
            value = probe()
            if value or self.check_mode or time.monotonic() >= self.deadline:
                return value
            time.sleep(POLL_S)

    def registered(self):
        node = self.api.get("v1", "Node", self.p["node"])
        if node is None or (self.p["require_pod_cidr"] and not (node.get("spec") or {}).get("podCIDR")):
            return None
        return node

    def serving_certificate(self, node):
        allowed = list(self.p["ip_addresses"]) + _internal_ips(node)
        found = approve_serving_requests(self.api, self.p["node"], allowed, self.p["dns_names"], self.check_mode)
        self.result.update(found)
        return found["approved"] or (found["issued"] and not self.p["new_request"])

    def label(self, node):
        current = (node.get("metadata") or {}).get("labels") or {}
        wanted = {k: v for k, v in self.p["labels"].items() if current.get(k) != v}
        if wanted and not self.check_mode:
            self.api.merge_patch("v1", "Node", self.p["node"], patch={"metadata": {"labels": wanted}})
        self.result["labels_changed"] = bool(wanted)

    def run(self):
        name = self.p["node"]
        node = self.poll(self.registered)
        if node is None:
            raise AnsibleActionFail("the Node %s did not register%s within %d s"
                                    % (name, " with a pod subnet" if self.p["require_pod_cidr"] else "",
                                       self.p["timeout"]), result=self.result)
        if not self.poll(lambda: self.serving_certificate(node)):
            why = refusals(self.result)
            raise AnsibleActionFail("no acceptable kubelet-serving request from %s within %d s%s"
                                    % (name, self.p["timeout"], ": " + why if why else ""), result=self.result)
        self.label(node)
        self.result["changed"] = bool(self.result["approved"]) or self.result["labels_changed"]
        self.result["node"] = dict(name=name, pod_cidr=(node.get("spec") or {}).get("podCIDR") or "",
                                   addresses=_internal_ips(node))
        return self.result


class ActionModule(KubeAction):
    ARGUMENT_SPEC = dict(
        node=dict(type="str", required=True),
        ip_addresses=dict(type="list", elements="str", default=[]),
        dns_names=dict(type="list", elements="str", default=[]),
        labels=dict(type="dict", default={}),
        require_pod_cidr=dict(type="bool", default=True),
        new_request=dict(type="bool", default=False),
        timeout=dict(type="int", default=120),
    )

    def act(self, api, args, check_mode):
        if not HAS_CRYPTOGRAPHY:
            raise AnsibleActionFail("the Python library cryptography is required on the controller")
        if args["timeout"] < 0:
            raise AnsibleActionFail("timeout must not be negative, got %d" % args["timeout"])
        bad = sorted(k for k, v in args["labels"].items() if not isinstance(v, str))
        if bad:
            raise AnsibleActionFail("labels: values must be strings (%s)" % ", ".join(bad))
        try:
            return _Admission(api, args, check_mode).run()
        except KubeApiError as exc:
            raise AnsibleActionFail("admitting %s: API call failed: %s" % (args["node"], exc)) from None
