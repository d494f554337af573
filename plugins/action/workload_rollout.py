# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request

from ansible.errors import AnsibleActionFail
from ansible_collections.kosmos.kubenest.plugins.module_utils import run_result
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError
from ansible_collections.kosmos.kubenest.plugins.module_utils.rollout import (
    name_taints,
    pod_problem,
    pod_ready,
    ready_pods,
    rolled_out,
    unschedulable,
    wanted_pods,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.kube_action import KubeAction

# Reads are a few milliseconds each: poll often so that a finished rollout is seen at once.
POLL_S = 0.25
# Once rolled out only the URL is left to answer: connection attempts that are refused cost nothing. Once every
# pod is ready only the controller's status is left to catch up: poll as often then too.
REACH_POLL_S = 0.1
REACH_ATTEMPT_S = 2


def _opener():
    """Reachability only: the certificate is not checked (clients pin their CA) and no proxy stands between."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))


def answers(opener, url):
    """Whether `url` answered 200, and what it answered or why it did not."""
    try:
        with opener.open(url, timeout=REACH_ATTEMPT_S) as response:
            return (response.status == 200), "HTTP %d" % response.status
    except urllib.error.HTTPError as exc:
        return False, "HTTP %d" % exc.code
    except urllib.error.URLError as exc:
        return False, str(exc.reason)
    except (OSError, ValueError) as exc:
        return False, str(exc) or type(exc).__name__


def _progress(workload, nodes=None):
    if workload is None:
        return "it does not exist"
    if workload.get("kind") == "DaemonSet":
        told = "" if nodes is None else " (the cluster has %d nodes)" % nodes
        updated = (workload.get("status") or {}).get("updatedNumberScheduled", 0)
        return "%s of %s pods ready, %s of the latest template%s" % (
            ready_pods(workload), wanted_pods(workload), updated, told)
    return "%s of %s replicas ready" % (ready_pods(workload), wanted_pods(workload))


class _Rollout:
    def __init__(self, api, args):
        self.api, self.p = api, args
        self.unschedulable_since = {}
        self.url = args.get("reachable_url")
        self.opener = _opener() if self.url else None
        self.unreachable = None  # what the URL did at the last attempt
        self.pods_ready = False  # every pod listed at the last look was ready
        self.nodes = None  # Nodes of the cluster at the last look, with on_every_node

    def reachable(self):
        if not self.url:
            return True
        found, self.unreachable = answers(self.opener, self.url)
        return found

    def workload(self):
        found = self.api.get("apps/v1", self.p["kind"], self.p["name"], self.p["namespace"])
        return dict(found, kind=self.p["kind"]) if found is not None else None

    def done(self, workload):
        """Rolled out, and with on_every_node its controller has counted every Node there is (a Node that just
        joined may not be counted yet)."""
        if not rolled_out(workload):
            return False
        if not self.p.get("on_every_node"):
            return True
        self.nodes = len(self.api.list("v1", "Node"))
        return wanted_pods(workload) >= self.nodes

    def pods(self, workload):
        labels = ((workload.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        if not labels:
            return []
        selector = ",".join("%s=%s" % item for item in sorted(labels.items()))
        return self.api.list("v1", "Pod", self.p["namespace"], label_selector=selector)

    def problem(self, workload):
        now = time.monotonic()
        pods = self.pods(workload)
        self.pods_ready = len(pods) >= wanted_pods(workload) and all(pod_ready(pod) for pod in pods)
        for pod in pods:
            name = pod["metadata"]["name"]
            if unschedulable(pod):
                self.unschedulable_since.setdefault(name, now)
            else:
                self.unschedulable_since.pop(name, None)
            found = pod_problem(pod, self.p["crash_restarts"], self.p["unschedulable_after"], now,
                                self.unschedulable_since.get(name))
            if found:
                # Read only now, on the way out: which taints the scheduler meant.
                return name, name_taints(found, pod, self.api.list("v1", "Node") if "taint" in found else [])
        return None

    def run(self, check_mode):
        started = time.monotonic()
        deadline = started + self.p["timeout"]
        what = "%s %s/%s" % (self.p["kind"], self.p["namespace"], self.p["name"])
        while True:
            workload = self.workload()
            waited = round(time.monotonic() - started, 1)
            done = self.done(workload)
            if done and self.reachable():
                return dict(changed=False, rolled_out=True, waited=waited, ready=ready_pods(workload),
                            **self.reach_result(True))
            if workload is not None:
                stuck = self.problem(workload)
                if stuck:
                    return dict(failed=True, msg=run_result.pod_stuck(what, stuck[0], stuck[1]),
                                changed=False, rolled_out=False, pod=stuck[0], problem=stuck[1], waited=waited)
            if check_mode:
                return dict(changed=False, rolled_out=done, waited=waited, ready=ready_pods(workload),
                            **self.reach_result(False))
            if time.monotonic() >= deadline:
                if done:
                    message = "%s is rolled out but %s does not answer after %d s: %s" % (
                        what, self.url, self.p["timeout"], self.unreachable)
                else:
                    message = "%s is not rolled out after %d s: %s" % (
                        what, self.p["timeout"], _progress(workload, self.nodes))
                return dict(failed=True, changed=False, rolled_out=done, waited=waited, msg=message,
                            ready=ready_pods(workload), **self.reach_result(False))
            time.sleep(REACH_POLL_S if done or self.pods_ready else POLL_S)

    def reach_result(self, reachable):
        return dict(reachable=reachable) if self.url else {}


class ActionModule(KubeAction):
    ARGUMENT_SPEC = dict(
        kind=dict(type="str", required=True, choices=["Deployment", "StatefulSet", "DaemonSet"]),
        name=dict(type="str", required=True),
        namespace=dict(type="str", required=True),
        timeout=dict(type="int", default=300),
        crash_restarts=dict(type="int", default=2),
        unschedulable_after=dict(type="int", default=15),
        reachable_url=dict(type="str"),
        on_every_node=dict(type="bool", default=False),
    )

    def act(self, api, args, check_mode):
        negative = sorted(k for k in ("timeout", "crash_restarts", "unschedulable_after") if args[k] < 0)
        if negative:
            raise AnsibleActionFail("%s must not be negative" % ", ".join(negative))
        if args["on_every_node"] and args["kind"] != "DaemonSet":
            raise AnsibleActionFail("on_every_node is for a DaemonSet, not a %s" % args["kind"])
        url = args.get("reachable_url")
        if url is not None and not url.startswith(("https://", "http://")):
            raise AnsibleActionFail("reachable_url must be an http:// or https:// URL, not %r" % (url,))
        try:
            return _Rollout(api, args).run(check_mode)
        except KubeApiError as exc:
            raise AnsibleActionFail("waiting for %s %s/%s: API call failed: %s"
                                    % (args["kind"], args["namespace"], args["name"], exc)) from None
