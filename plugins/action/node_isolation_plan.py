# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.node_isolation import plan

GLOBALNODE_API = "kosmos.io/v1alpha1"


class ActionModule(KubeAction):
    """The host's Nodes and the GlobalNodes read and the plan worked out in one task: a move of a node works it
    out up to three times, and each task is paid for on the controller."""

    def act(self, api, args, check_mode):
        del args, check_mode  # only reads
        nodes = api.list("v1", "Node")
        global_nodes = api.list(GLOBALNODE_API, "GlobalNode")
        try:
            worked_out = plan(nodes, global_nodes)
        except (TypeError, ValueError, AttributeError) as exc:
            raise AnsibleActionFail("cannot work out the node filters from the host's objects: %s" % exc) from None
        return {"changed": False, "plan": worked_out, "nodes": len(nodes), "global_nodes": len(global_nodes)}
