# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import time
import urllib.parse

from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.node_drain import (
    classify,
    eviction,
    pod_ref,
    refs,
    room_elsewhere,
)


class _Drain:
    def __init__(self, api, args):
        self.api, self.p = api, args
        self.deadline = time.monotonic() + args["timeout"]
        self.refused = {}

    def pods(self):
        return self.api.list("v1", "Pod", field_selector="spec.nodeName=" + self.p["name"])

    def cordon(self, node, check_mode):
        if (node.get("spec") or {}).get("unschedulable"):
            return False
        if not check_mode:
            self.api.merge_patch("v1", "Node", self.p["name"], patch={"spec": {"unschedulable": True}})
        return True

    def evict(self, pod):
        """True once the pod is evicted or gone; False while a disruption budget refuses."""
        meta = pod["metadata"]
        path = "/api/v1/namespaces/%s/pods/%s/eviction" % (
            urllib.parse.quote(meta["namespace"], safe=""), urllib.parse.quote(meta["name"], safe=""))
        try:
            self.api.request("POST", path, body=eviction(pod), ok_missing=True, retry_busy=False)
        except KubeApiError as exc:
            if exc.status == 429:
                self.refused[pod_ref(pod)] = str(exc)
                return False
            raise
        self.refused.pop(pod_ref(pod), None)
        return True

    def run(self, check_mode):
        node = self.api.get("v1", "Node", self.p["name"])
        if node is None:
            raise AnsibleActionFail("Node %s does not exist" % self.p["name"])
        evict, left, refusals = classify(self.pods(), self.p["force"], self.p["delete_emptydir_data"])
        if refusals:
            # Nothing is touched, not even the cordon: the caller decides what to do with those pods first.
            raise AnsibleActionFail("cannot drain %s: %s" % (self.p["name"], "; ".join(refusals)))
        changed = self.cordon(node, check_mode)
        # Pods already terminating (an earlier drain evicted them) are only waited for.
        pending = [p for p in evict if not (p.get("metadata") or {}).get("deletionTimestamp")]
        evicted = refs(evict)
        if check_mode:
            return {"changed": changed or bool(pending), "evicted": evicted, "left": refs(left),
                    "deleted_without_room": [], "waited": 0.0}
        started = time.monotonic()
        deleted = []
        # Like kubectl drain: a budget that refuses now may allow once a replacement is ready elsewhere.
        while pending:
            pending = [p for p in pending if not self.evict(p)]
            changed = True
            if not pending:
                break
            if self.p["without_room"] == "delete" and not room_elsewhere(self.api.list("v1", "Node"), self.p["name"]):
                # No other node can take a replacement (every node is leaving, or the rest are cordoned): the
                # budget could only be met by waiting for the timeout. The pods are deleted, grace period kept.
                for pod in pending:
                    meta = pod["metadata"]
                    self.api.delete("v1", "Pod", meta["name"], meta["namespace"])
                    deleted.append(pod_ref(pod))
                pending = []
                break
            if time.monotonic() >= self.deadline:
                raise AnsibleActionFail(
                    "a disruption budget still refuses to evict from %s after %ss: %s"
                    % (self.p["name"], self.p["timeout"], "; ".join(sorted(self.refused.values()))))
            time.sleep(self.p["wait_sleep"])
        if self.p["wait"]:
            self.wait_gone({(p.get("metadata") or {}).get("uid") for p in evict})
        return {"changed": changed, "evicted": evicted, "left": refs(left), "deleted_without_room": deleted,
                "waited": round(time.monotonic() - started, 1)}

    def wait_gone(self, uids):
        while True:
            still = [p for p in self.pods() if (p.get("metadata") or {}).get("uid") in uids]
            if not still:
                return
            if time.monotonic() >= self.deadline:
                raise AnsibleActionFail("pods evicted from %s still run after %ss: %s"
                                        % (self.p["name"], self.p["timeout"], ", ".join(refs(still))))
            time.sleep(self.p["wait_sleep"])


class ActionModule(KubeAction):
    ARGUMENT_SPEC = dict(
        name=dict(type="str", required=True),
        wait=dict(type="bool", default=True),
        timeout=dict(type="float", default=120.0),
        wait_sleep=dict(type="float", default=1.0),
        force=dict(type="bool", default=False),
        delete_emptydir_data=dict(type="bool", default=False),
        without_room=dict(type="str", default="wait", choices=["wait", "delete"]),
    )

    def act(self, api, args, check_mode):
        return _Drain(api, args).run(check_mode)
