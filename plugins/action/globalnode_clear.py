# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import time

from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display
from ansible_collections.kosmos.kubenest.plugins.module_utils import globalnodes as protocol
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.globalnode_clear import (
    FAILED,
    WAITING,
    annotations_of,
    failure,
    progress_line,
    verdict,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction

display = Display()
API_VERSION, KIND = "%s/%s" % (protocol.GROUP, protocol.VERSION), "GlobalNode"


class ActionModule(KubeAction):
    ARGUMENT_SPEC = dict(
        names=dict(type="list", elements="str", required=True),
        wait=dict(type="bool", default=True),
        timeout=dict(type="float", default=1800.0),
        interval=dict(type="float", default=5.0),
    )

    def act(self, api, args, check_mode):
        names = list(dict.fromkeys(n.strip() for n in args["names"] if n and n.strip()))
        if not names:
            raise AnsibleActionFail("names must name at least one held GlobalNode")
        if args["timeout"] < 0 or args["interval"] <= 0:
            raise AnsibleActionFail("timeout must not be negative and interval must be positive")
        found = {name: api.get(API_VERSION, KIND, name) for name in names}
        refused = protocol.clear_refusals(found)
        if refused:
            raise AnsibleActionFail("only held nodes are cleared, and nothing was asked: %s" % "; ".join(refused))
        asking = [n for n in names if protocol.CLEAR_ANNOTATION not in annotations_of(found[n])]
        result = {"changed": bool(asking), "asked": asking, "waited": 0.0,
                  "states": {n: protocol.state_of(found[n]) for n in names}}
        if check_mode:
            return result
        for name in asking:
            api.merge_patch(API_VERSION, KIND, name, patch={"metadata": {"annotations": {
                protocol.CLEAR_ANNOTATION: "asked", protocol.CLEAR_FAILED_ANNOTATION: None}}})
        if args["wait"]:
            result.update(self._wait(api, names, args))
        return result

    @staticmethod
    def _wait(api, names, args):
        started = time.monotonic()
        deadline, said = started + args["timeout"], {}
        while True:
            nodes = {name: api.get(API_VERSION, KIND, name) for name in names}
            for name, node in nodes.items():
                line = progress_line(name, node)
                if said.get(name) != line:  # each change once, as AWX's job output and a terminal show it
                    display.display("  %s" % line)
                    said[name] = line
            verdicts = {name: verdict(node) for name, node in nodes.items()}
            if WAITING not in verdicts.values() or time.monotonic() >= deadline:
                break
            time.sleep(min(args["interval"], max(0.0, deadline - time.monotonic())))
        result = {"waited": round(time.monotonic() - started, 1),
                  "states": {n: protocol.state_of(node) if node else None for n, node in nodes.items()}}
        problems = [failure(n, nodes[n]) for n, v in verdicts.items() if v == FAILED]
        late = [n for n, v in verdicts.items() if v == WAITING]
        if late:
            problems.append("not cleared within %.0fs: %s (the operator may still be clearing them)"
                            % (args["timeout"], ", ".join(late)))
        if problems:
            result.update(failed=True, msg="; ".join(problems))
        return result
