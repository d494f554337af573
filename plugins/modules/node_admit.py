#!/usr/bin/python
# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_admit
short_description: Admit a node whose kubelet has just joined a cluster
version_added: 1.1.0
description:
  - One call for the API side of a kubelet's join, in the order the kubelet needs it. It waits until the Node
    O(node) is registered (with a pod subnet, see O(require_pod_cidr)), approves the node's kubelet-serving
    certificate requests with the checks of M(kosmos.kubenest.kubelet_serving_csr), waiting for one when the
    kubelet has not sent it yet, and merges O(labels) into the Node's labels.
  - Waiting is polled every half second, bounded by O(timeout) in all.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  ip_addresses:
    description:
      - Addresses the node's serving certificate may name, besides the InternalIP addresses its Node reports.
    type: list
    elements: str
    default: []
  labels:
    description: Labels merged into the Node's labels; other labels are left alone.
    type: dict
    default: {}
  require_pod_cidr:
    description: Wait until the cluster has given the Node a pod subnet (C(spec.podCIDR)).
    type: bool
    default: true
  timeout:
    description: Seconds to wait for the Node and for an acceptable serving-certificate request.
    type: int
    default: 120
attributes:
  check_mode:
    support: full
    description: Looks once without waiting and reports which requests would be approved and whether labels change.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
extends_documentation_fragment:
  - kosmos.kubenest.kube_client
  - kosmos.kubenest.kube_client.serving_csr
"""

EXAMPLES = r"""
- name: Admit kn-w1 into the virtual cluster
  kosmos.kubenest.node_admit:
    kubeconfig: tenant-admin.conf
    node: kn-w1
    ip_addresses: [198.18.0.12]
    labels: {kosmos.io/globalnode: kn-w1}
  register: admitted

- name: Its pod subnet
  ansible.builtin.debug:
    msg: "{{ admitted.node.pod_cidr }}"
"""

RETURN = r"""
node:
  description: The admitted Node.
  returned: success
  type: dict
  contains:
    name:
      description: Node name.
      type: str
    pod_cidr:
      description: The Node's pod subnet (empty when O(require_pod_cidr=false) and none is given yet).
      type: str
    addresses:
      description: The Node's InternalIP addresses.
      type: list
      elements: str
approved:
  description: Serving-certificate requests this call approved.
  returned: always
  type: list
  elements: str
issued:
  description: Requests of the node approved earlier.
  returned: always
  type: list
  elements: str
refused:
  description: Requests left pending, with the reason.
  returned: always
  type: list
  elements: dict
labels_changed:
  description: Whether O(labels) changed the Node.
  returned: always
  type: bool
"""

import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.kosmos.kubenest.plugins.module_utils.csr import (
    HAS_CRYPTOGRAPHY,
    approve_serving_requests,
    refusals,
)
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_client import (
    HAS_KUBERNETES,
    KUBECONFIG_ARGS,
    KUBERNETES_IMPORT_ERROR,
    ApiException,
    KubeClientError,
    api_client,
    describe,
)

POLL_S = 0.5


def _internal_ips(node):
    return [a.address for a in (node.status and node.status.addresses) or [] if a.type == "InternalIP"]


class Admission:
    def __init__(self, module, k8s, api):
        self.module, self.k8s = module, k8s
        self.core, self.certs = k8s.CoreV1Api(api), k8s.CertificatesV1Api(api)
        self.p = module.params
        self.deadline = time.monotonic() + self.p["timeout"]
        self.result = dict(changed=False, approved=[], issued=[], refused=[], labels_changed=False)

    def poll(self, probe):
        """probe() until it returns something true or time is up (check mode: once)."""
        while True:
            value = probe()
            if value or self.module.check_mode or time.monotonic() >= self.deadline:
                return value
            time.sleep(POLL_S)

    def registered(self):
        try:
            node = self.core.read_node(self.p["node"], _request_timeout=10)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        if self.p["require_pod_cidr"] and not node.spec.pod_cidr:
            return None
        return node

    def serving_certificate(self, node):
        allowed = list(self.p["ip_addresses"]) + _internal_ips(node)
        found = approve_serving_requests(self.k8s, self.certs, self.p["node"], allowed, self.p["dns_names"],
                                         self.module.check_mode)
        self.result.update(found)
        return found["approved"] or found["issued"]

    def label(self, node):
        current = node.metadata.labels or {}
        wanted = dict((k, v) for k, v in self.p["labels"].items() if current.get(k) != v)
        if wanted and not self.module.check_mode:
            self.core.patch_node(self.p["node"], {"metadata": {"labels": wanted}}, _request_timeout=30)
        self.result["labels_changed"] = bool(wanted)

    def run(self):
        name = self.p["node"]
        node = self.poll(self.registered)
        if node is None:
            self.module.fail_json(msg="the Node %s did not register%s within %d s"
                                  % (name, " with a pod subnet" if self.p["require_pod_cidr"] else "",
                                     self.p["timeout"]), **self.result)
        if not self.poll(lambda: self.serving_certificate(node)):
            why = refusals(self.result)
            self.module.fail_json(msg="no acceptable kubelet-serving request from %s within %d s%s"
                                  % (name, self.p["timeout"], ": " + why if why else ""), **self.result)
        self.label(node)
        self.result["changed"] = bool(self.result["approved"]) or self.result["labels_changed"]
        self.result["node"] = dict(name=name, pod_cidr=node.spec.pod_cidr or "", addresses=_internal_ips(node))
        return self.result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            KUBECONFIG_ARGS,
            node=dict(type="str", required=True),
            ip_addresses=dict(type="list", elements="str", default=[]),
            dns_names=dict(type="list", elements="str", default=[]),
            labels=dict(type="dict", default={}),
            require_pod_cidr=dict(type="bool", default=True),
            timeout=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    if not HAS_CRYPTOGRAPHY:
        module.fail_json(msg=missing_required_lib("cryptography"))
    if module.params["timeout"] < 0:
        module.fail_json(msg="timeout must not be negative, got %d" % module.params["timeout"])
    bad = sorted(k for k, v in module.params["labels"].items() if not isinstance(v, str))
    if bad:
        module.fail_json(msg="labels: values must be strings (%s)" % ", ".join(bad))
    try:
        from kubernetes import client as k8s

        admission = Admission(module, k8s, api_client(module.params["kubeconfig"], module.params["context"]))
        result = admission.run()
    except KubeClientError as exc:
        module.fail_json(msg=str(exc))
    except ApiException as exc:
        module.fail_json(msg="admitting %s: API call failed: %s" % (module.params["node"], describe(exc)))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
