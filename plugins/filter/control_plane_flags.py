# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: control_plane_flags
short_description: Command-line flags of a Kubernetes control-plane component, the same in every mode
version_added: 1.1.0
description:
  - Returns C(--flag=value) strings for kube-apiserver, kube-controller-manager or kube-scheduler, from the
    definitions that the hosted control plane's Deployments (P(kosmos.kubenest.hosted_manifest#filter)) use
    too, so that units on machines and Deployments never drift apart. Only what differs between the modes is a
    setting.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
options:
  _input:
    description: The component.
    type: str
    choices: [apiserver, controller-manager, scheduler]
    required: true
  settings:
    description:
      - C(files), where the component finds its files, with C(pki) (the cluster PKI directory), C(etcd_ca),
        C(etcd_cert), C(etcd_key) (the apiserver's etcd client files) and C(conf) (the component kubeconfigs'
        directory); all absolute paths.
      - For C(apiserver), C(secure_port), C(etcd_servers) (a list of URLs), C(service_cidr),
        C(cluster_domain), C(advertise_address), C(kubelet_serving_ca) (kubelets serve with certificates the
        cluster CA signed), C(endpoint_reconciler) and C(aggregator_routing) (webhooks and aggregated APIs
        called at their pods' addresses).
      - For C(controller-manager), C(cluster_name), C(service_cidr), C(bind_address), C(leader_elect),
        C(pod_cidr) (when given, nodes get subnets of it) and C(node_cidr_mask).
      - For C(scheduler), C(bind_address) and C(leader_elect).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The scheduler's command line
  ansible.builtin.debug:
    msg: >-
      {{ 'scheduler' | kosmos.kubenest.control_plane_flags({'files': files, 'bind_address': '127.0.0.1',
                                                             'leader_elect': true}) }}
"""

RETURN = r"""
_value:
  description: C(--flag=value) strings, in a fixed order.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.control_plane_flags import (
    Files,
    apiserver_flags,
    controller_manager_flags,
    scheduler_flags,
)

BUILDERS = {
    "apiserver": (apiserver_flags, ("secure_port", "etcd_servers", "service_cidr", "cluster_domain",
                                    "advertise_address", "kubelet_serving_ca", "endpoint_reconciler",
                                    "aggregator_routing")),
    "controller-manager": (controller_manager_flags, ("cluster_name", "service_cidr", "bind_address",
                                                      "leader_elect", "pod_cidr", "node_cidr_mask")),
    "scheduler": (scheduler_flags, ("bind_address", "leader_elect")),
}


def control_plane_flags(component, settings):
    if component not in BUILDERS:
        raise AnsibleFilterError("control_plane_flags: unknown component %r; one of %s"
                                 % (component, ", ".join(BUILDERS)))
    settings = dict(settings or {})
    build, keys = BUILDERS[component]
    unknown = sorted(set(settings) - set(keys) - {"files"})
    if unknown:
        raise AnsibleFilterError("control_plane_flags: %s takes no %s" % (component, ", ".join(unknown)))
    try:
        files = Files(**dict(settings.get("files") or {}))
        options = build(files, **dict((k, settings[k]) for k in keys if k in settings))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("control_plane_flags(%s): %s" % (component, exc)) from None
    return ["--%s=%s" % (key, value) for key, value in options]


class FilterModule:
    def filters(self):
        return {"control_plane_flags": control_plane_flags}
