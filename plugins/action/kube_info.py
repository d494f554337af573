# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import time

from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import condition_met
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction


def _unmet(resources, condition):
    return [r for r in resources if not condition_met(r, condition)]


def _describe(obj, condition):
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if entry.get("type") == condition["type"]:
            return "%s is %s=%s (%s)" % (obj["metadata"]["name"], entry.get("type"), entry.get("status"),
                                         entry.get("reason") or "no reason")
    return "%s has no condition %s" % (obj["metadata"]["name"], condition["type"])


class ActionModule(KubeAction):
    ARGUMENT_SPEC = dict(
        api_version=dict(type="str", default="v1"),
        kind=dict(type="str", required=True),
        name=dict(type="str"),
        namespace=dict(type="str"),
        label_selectors=dict(type="list", elements="str", default=[]),
        field_selectors=dict(type="list", elements="str", default=[]),
        wait=dict(type="bool", default=False),
        wait_condition=dict(type="dict", options=dict(
            type=dict(type="str", required=True),
            status=dict(type="str", default="True", choices=["True", "False", "Unknown"]),
            reason=dict(type="str"),
        )),
        wait_timeout=dict(type="float", default=120.0),
        wait_sleep=dict(type="float", default=1.0),
    )

    def act(self, api, args, check_mode):
        del check_mode  # only reads
        deadline = time.monotonic() + args["wait_timeout"]
        while True:
            resources = self._read(api, args)
            if not args["wait"]:
                return {"changed": False, "resources": resources}
            pending = _unmet(resources, args["wait_condition"]) if args["wait_condition"] else []
            missing = args["name"] and not resources
            if not missing and not pending:
                return {"changed": False, "resources": resources}
            if time.monotonic() >= deadline:
                break
            time.sleep(args["wait_sleep"])
        what = "%s %s" % (args["kind"], args["name"]) if args["name"] else "every %s" % args["kind"]
        if missing:
            raise AnsibleActionFail("%s did not appear within %ss" % (what, args["wait_timeout"]))
        raise AnsibleActionFail("%s did not reach %s=%s within %ss: %s" % (
            what, args["wait_condition"]["type"], args["wait_condition"]["status"], args["wait_timeout"],
            "; ".join(_describe(r, args["wait_condition"]) for r in pending[:5])))

    @staticmethod
    def _read(api, args):
        if args["name"]:
            obj = api.get(args["api_version"], args["kind"], args["name"], args["namespace"])
            return [obj] if obj is not None else []
        return api.list(args["api_version"], args["kind"], args["namespace"],
                        label_selector=",".join(args["label_selectors"]) or None,
                        field_selector=",".join(args["field_selectors"]) or None)
