#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: workload_rollout
short_description: Wait until a Deployment or StatefulSet is rolled out, failing fast when its pods cannot start
version_added: 1.1.0
description:
  - Polls the workload until the controller has seen its latest spec and every replica runs that spec and is
    ready (available, for a Deployment).
  - Meanwhile looks at the workload's pods and fails as soon as one cannot start, with the pod's own reason
    and message; no amount of waiting would help. Those are C(ImagePullBackOff), C(InvalidImageName),
    C(ErrImageNeverPull), C(CreateContainerConfigError) and C(CreateContainerError); C(CrashLoopBackOff)
    once a container restarted O(crash_restarts) times; and C(Unschedulable) once the scheduler has found no
    node for O(unschedulable_after) seconds.
  - Otherwise fails after O(timeout) seconds, saying what the workload's status shows.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  kind:
    description: The workload's kind.
    type: str
    choices: [Deployment, StatefulSet]
    required: true
  name:
    description: The workload's name.
    type: str
    required: true
  namespace:
    description: The workload's namespace.
    type: str
    required: true
  timeout:
    description: Seconds to wait in all.
    type: int
    default: 300
  crash_restarts:
    description: Restarts of one container in a crash loop after which the wait gives up.
    type: int
    default: 2
  unschedulable_after:
    description: Seconds a pod may stay unschedulable before the wait gives up.
    type: int
    default: 15
attributes:
  check_mode:
    support: full
    description: Looks once without waiting; a workload that is not there yet is reported as not rolled out.
  diff_mode:
    support: none
    description: Nothing changes.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
"""

EXAMPLES = r"""
- name: Wait until etcd is ready
  kosmos.kubenest.workload_rollout:
    kind: StatefulSet
    name: vc1-etcd
    namespace: tenants
    timeout: 300
"""

RETURN = r"""
rolled_out:
  description: Whether the workload is rolled out.
  returned: always
  type: bool
problem:
  description: Why a pod cannot start, as the pod's reason and message, when that ended the wait.
  returned: failure
  type: str
pod:
  description: The pod that cannot start.
  returned: failure
  type: str
waited:
  description: Seconds waited.
  returned: always
  type: float
"""

import time

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
from ansible_collections.kosmos.kubenest.plugins.module_utils.rollout import pod_problem, rolled_out, unschedulable

POLL_S = 1.0


def _progress(workload):
    if workload is None:
        return "it does not exist"
    status, spec = workload.get("status") or {}, workload.get("spec") or {}
    return "%s of %s replicas ready" % (status.get("readyReplicas", 0), spec.get("replicas", 1))


class Rollout:
    def __init__(self, module, k8s, api):
        self.module, self.api, self.p = module, api, module.params
        self.apps, self.core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
        self.unschedulable_since = {}

    def workload(self):
        read = (self.apps.read_namespaced_deployment if self.p["kind"] == "Deployment"
                else self.apps.read_namespaced_stateful_set)
        try:
            found = read(self.p["name"], self.p["namespace"], _request_timeout=10)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(self.api.sanitize_for_serialization(found), kind=self.p["kind"])

    def pods(self, workload):
        labels = ((workload.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        if not labels:
            return []
        selector = ",".join("%s=%s" % item for item in sorted(labels.items()))
        listed = self.core.list_namespaced_pod(self.p["namespace"], label_selector=selector, _request_timeout=10)
        return [self.api.sanitize_for_serialization(pod) for pod in listed.items]

    def problem(self, workload):
        now = time.monotonic()
        for pod in self.pods(workload):
            name = pod["metadata"]["name"]
            if unschedulable(pod):
                self.unschedulable_since.setdefault(name, now)
            else:
                self.unschedulable_since.pop(name, None)
            found = pod_problem(pod, self.p["crash_restarts"], self.p["unschedulable_after"], now,
                                self.unschedulable_since.get(name))
            if found:
                return name, found
        return None

    def run(self):
        started = time.monotonic()
        deadline = started + self.p["timeout"]
        what = "%s %s/%s" % (self.p["kind"], self.p["namespace"], self.p["name"])
        while True:
            workload = self.workload()
            waited = round(time.monotonic() - started, 1)
            if rolled_out(workload):
                return dict(changed=False, rolled_out=True, waited=waited)
            if workload is not None:
                stuck = self.problem(workload)
                if stuck:
                    self.module.fail_json(msg="%s cannot come up: pod %s: %s" % (what, stuck[0], stuck[1]),
                                          rolled_out=False, pod=stuck[0], problem=stuck[1], waited=waited)
            if self.module.check_mode:
                return dict(changed=False, rolled_out=False, waited=waited)
            if time.monotonic() >= deadline:
                self.module.fail_json(msg="%s is not rolled out after %d s: %s" % (what, self.p["timeout"],
                                                                                   _progress(workload)),
                                      rolled_out=False, waited=waited)
            time.sleep(POLL_S)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            KUBECONFIG_ARGS,
            kind=dict(type="str", required=True, choices=["Deployment", "StatefulSet"]),
            name=dict(type="str", required=True),
            namespace=dict(type="str", required=True),
            timeout=dict(type="int", default=300),
            crash_restarts=dict(type="int", default=2),
            unschedulable_after=dict(type="int", default=15),
        ),
        supports_check_mode=True,
    )
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    negative = sorted(k for k in ("timeout", "crash_restarts", "unschedulable_after") if module.params[k] < 0)
    if negative:
        module.fail_json(msg="%s must not be negative" % ", ".join(negative))
    try:
        from kubernetes import client as k8s

        result = Rollout(module, k8s, api_client(module.params["kubeconfig"], module.params["context"])).run()
    except KubeClientError as exc:
        module.fail_json(msg=str(exc))
    except ApiException as exc:
        module.fail_json(msg="waiting for %s %s/%s: API call failed: %s" % (
            module.params["kind"], module.params["namespace"], module.params["name"], describe(exc)))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
