# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: hosted_manifest
short_description: A workload of a hosted virtual-cluster control plane, built as data
version_added: 1.1.0
description:
  - Builds the StatefulSet of a virtual cluster's etcd or the Deployment of its kube-apiserver,
    kube-controller-manager or kube-scheduler as a dictionary for kosmos.kubenest.kube_apply; C(apiserver-config)
    builds the ConfigMap C(<name>-apiserver-config) with the files the API server reads from it.
  - C(<component>-budget) builds the component's PodDisruptionBudget, which lets at most one of its pods be
    evicted at a time and pods that are not ready always.
  - Every value lands in a field of its own and is checked first (names, image references, addresses,
    CIDRs); no value is rendered into YAML text and parsed back, so none can add fields to the manifest.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The component.
    type: str
    choices: [etcd, apiserver, apiserver-config, controller-manager, scheduler, etcd-budget, apiserver-budget,
              controller-manager-budget, scheduler-budget]
    required: true
  vc:
    description: The virtual cluster (C(name), C(namespace), C(labels), C(selector), C(owner_references)).
    type: dict
    required: true
  settings:
    description:
      - The component's settings. C(etcd) takes C(image), C(advertise_ip), C(storage_class) (empty for the
        host's default StorageClass), C(storage_size), C(ephemeral) (data in an emptyDir instead of a volume
        claim), C(quota_backend_bytes), C(resources) (requests and limits), C(members) (1 or 3; several
        members find each other under the headless Service C(<name>-etcd-peer)) and C(restore) (C(sha256) and
        C(chunks) of a snapshot that every member starts from, carried by the Secrets C(<name>-etcd-restore-NNN);
        empty for none), C(trust_revision) (a digest of the CAs etcd trusts while a rotation trusts two, put on
        the pod template; empty for none), and C(host_nodes) like the others below.
      - The others take C(image_repository) and C(version); C(apiserver) also C(etcd_endpoint), C(service_cidr)
        and C(cluster_domain); C(controller-manager) also C(service_cidr), C(pod_cidr) and C(node_cidr_mask).
      - C(apiserver), C(controller-manager) and C(scheduler) take C(replicas) (1, 2 or 3; the API servers serve
        side by side, the controllers elect a leader) and C(host_nodes), the schedulable host nodes of the
        placement. With at least as many nodes as replicas each replica needs a node of its own (required
        anti-affinity); with fewer they spread as far as the nodes allow.
      - All take C(node_selector) and C(tolerations); the others take C(resources) by component name, and
        C(pki_revision), a hexadecimal digest of their certificates put on the pod template, so that re-issued
        certificates roll the Deployment. C(await_apiserver) (default true) starts C(apiserver) through
        C(await-ready) (which the images C(make images) builds carry), which waits for its etcd and then becomes
        the API server, and C(controller-manager) and C(scheduler) likewise once their API server answers, so that
        all three can be created while etcd starts. C(gogc) sets C(GOGC) by
        component name (0 or absent for Go's default). C(extra_args) gives extra flags by component name (flag
        name without its dashes, and its value); flags the collection sets, flags that take a file, a directory
        or a host address, and values that are paths are refused, naming each (C(enable-admission-plugins) of
        C(apiserver) adds to the collection's list).
      - C(apiserver) and C(apiserver-config) also take C(authentication), an AuthenticationConfiguration's
        C(jwt) issuers and C(anonymous) access (the CA of an issuer inline, never a path), and C(audit), the
        C(policy) of an audit.k8s.io/v1 Policy and the C(log)'s C(maxSizeMB), C(maxBackups) and C(maxAgeDays).
        The log is written to a volume of the API server's pod and streamed by its container C(audit-log); a
        changed file rolls the API server.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The etcd StatefulSet
  kosmos.kubenest.kube_apply:
    definition: >-
      {{ 'etcd' | kosmos.kubenest.hosted_manifest(kubenest_vc, {
           'image': 'kubenest.local/etcd:' ~ lookup('kosmos.kubenest.pinned_version', 'etcd'),
           'advertise_ip': '10.96.0.20'}) }}
"""

RETURN = r"""
_value:
  description: The manifest.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.module_utils import run_result
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_control_plane import (
    ControlPlaneSettings,
    apiserver_config_map,
    apiserver_deployment,
    controller_manager_deployment,
    scheduler_deployment,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_etcd import etcd_statefulset
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_pods import VirtualClusterRef, disruption_budget

PLACEMENT = ("node_selector", "tolerations", "resources")
COMPONENTS = {
    "apiserver": (apiserver_deployment, ("etcd_endpoint", "service_cidr", "cluster_domain", "konnectivity_image",
                                         "authentication", "audit")),
    "apiserver-config": (apiserver_config_map, ("cluster_domain", "authentication", "audit")),
    "controller-manager": (controller_manager_deployment, ("service_cidr", "pod_cidr", "node_cidr_mask")),
    "scheduler": (scheduler_deployment, ()),
}
BUDGET = "-budget"


def _pick(settings, keys):
    return dict((k, settings[k]) for k in keys if k in settings)


def hosted_manifest(component, vc, settings):
    settings = dict(settings or {})
    try:
        if component == "etcd":
            keys = ("image", "advertise_ip", "storage_class", "storage_size", "ephemeral", "quota_backend_bytes",
                    "members", "restore", "host_nodes", "trust_revision")
            picked = _pick(settings, keys + PLACEMENT)
            if isinstance(picked.get("members"), str) and picked["members"].isdigit():
                picked["members"] = int(picked["members"])
            picked["restore"] = picked.get("restore") or None
            return etcd_statefulset(vc, **picked)
        if component.endswith(BUDGET) and component[:-len(BUDGET)] in ("etcd",) + tuple(COMPONENTS):
            return disruption_budget(VirtualClusterRef(vc), component[:-len(BUDGET)])
        if component not in COMPONENTS:
            raise ValueError("unknown component %r; one of etcd, %s, or one of them with %s"
                             % (component, ", ".join(COMPONENTS), BUDGET))
        build, keys = COMPONENTS[component]
        shared_keys = ("image_repository", "version", "pki_revision", "await_apiserver", "gogc",
                       "extra_args", "replicas", "host_nodes") + PLACEMENT
        shared = ControlPlaneSettings(vc, **_pick(settings, shared_keys))
        return build(shared, **_pick(settings, keys))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(run_result.permanent("InvalidRequest", "%s manifest: %s" % (component, exc))) from None


class FilterModule:
    def filters(self):
        return {"hosted_manifest": hosted_manifest}
