# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import time

from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import virtualcluster_wait as vw
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction

display = Display()


class ActionModule(KubeAction):
    ARGUMENT_SPEC = dict(
        namespace=dict(type="str", required=True),
        name=dict(type="str", required=True),
        timeout=dict(type="float", default=900.0),
        interval=dict(type="float", default=5.0),
        quiet=dict(type="bool", default=False),
    )

    def act(self, api, args, check_mode):
        del check_mode  # only reads
        if args["timeout"] < 0 or args["interval"] <= 0:
            raise AnsibleActionFail("timeout must not be negative and interval must be positive")
        ref = "%s/%s" % (args["namespace"], args["name"])
        started = time.monotonic()
        deadline, said = started + args["timeout"], None
        while True:
            vc = api.get("kosmos.io/v1alpha1", "VirtualCluster", args["name"], args["namespace"])
            if vc is None:
                raise AnsibleActionFail("VirtualCluster %s does not exist (deleted while waiting?)" % ref)
            verdict = vw.verdict(vc)
            line = vw.progress_line(ref, vc)
            # Each change once, as it happens: what AWX's job output and a terminal show while the play waits.
            if line != said and not args["quiet"]:
                display.display("  %s" % line)
                said = line
            if verdict != vw.WAITING or time.monotonic() >= deadline:
                break
            time.sleep(min(args["interval"], max(0.0, deadline - time.monotonic())))
        result = {"changed": False, "ready": verdict == vw.READY, "status": (vc.get("status") or {}),
                  "waited": round(time.monotonic() - started, 1)}
        if verdict != vw.READY:
            result.update(failed=True, msg=vw.failure_message(ref, vc, timed_out=verdict == vw.WAITING))
        return result
