# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.module_utils import run_result
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.ownership import classify


class ActionModule(KubeAction):
    ARGUMENT_SPEC = dict(
        namespace=dict(type="str", required=True),
        queries=dict(type="list", elements="dict", required=True, options=dict(
            api_version=dict(type="str", required=True),
            kind=dict(type="str", required=True),
            names=dict(type="list", elements="str"),
            label_selector=dict(type="str"),
        )),
        owner=dict(type="dict", options=dict(
            name=dict(type="str", required=True),
            uid=dict(type="str", default=""),
        )),
    )

    def act(self, api, args, check_mode):
        del check_mode  # only reads
        results = []
        for query in args["queries"]:
            try:
                api.resource(query["api_version"], query["kind"])
            except KubeApiError:
                raise AnsibleActionFail("queries: the API server has no kind %s in %s"
                                        % (query["kind"], query["api_version"])) from None
            try:
                found = api.list_metadata(query["api_version"], query["kind"], args["namespace"],
                                          label_selector=query["label_selector"])
            except KubeApiError as exc:
                raise AnsibleActionFail("listing %s in %s failed: %s" % (query["kind"], args["namespace"], exc)) \
                    from None
            names = query["names"]
            results.append(dict(item=query, resources=[r for r in found
                                                       if names is None or r["metadata"].get("name") in names]))
        owner = args.get("owner")
        if not owner:
            return {"changed": False, "results": results}
        # In the same task as the listing: the check sits before everything a run writes.
        foreign = classify([(r["item"], r["resources"]) for r in results], owner["name"], owner["uid"])["foreign"]
        outcome = {"changed": False, "results": results, "foreign": foreign}
        if foreign:
            outcome.update(failed=True, msg=run_result.permanent(
                "NotOwned", "%s already exist and do not belong to VirtualCluster %s; remove or rename them: a virtual "
                "cluster never takes over objects" % (", ".join(foreign), owner["name"])))
        return outcome
