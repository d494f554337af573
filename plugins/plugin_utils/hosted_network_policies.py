# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The NetworkPolicies of a hosted control plane, as data.

Tenants have root on their nodes, and pods of the host and of other tenants share the host's pod network:
a virtual cluster's etcd answers only its own apiserver, the apiserver only its API port and the port its
Konnectivity agents dial, the controller-manager and scheduler nobody. Egress stays open (the apiserver calls
etcd, kubelets and webhooks). Kubelet probes come from the node and are not subject to policies.
"""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_pods import VirtualClusterRef

COMPONENT = "app.kubernetes.io/component"
POLICIES = ("etcd", "apiserver", "controllers")


def _tcp(port):
    return [{"protocol": "TCP", "port": port}]


def _policy(vc, name, pod_selector, ingress):
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": vc.metadata("%s-%s" % (vc.name, name), name),
            "spec": {"podSelector": pod_selector, "policyTypes": ["Ingress"], "ingress": ingress}}


def network_policies(vc, which=POLICIES):
    """The policies named in `which` (etcd, apiserver, controllers) for the virtual cluster `vc`."""
    vc = VirtualClusterRef(vc)
    unknown = [name for name in which if name not in POLICIES]
    if unknown:
        raise ValueError("unknown network policies %s; known: %s" % (", ".join(unknown), ", ".join(POLICIES)))
    built = {
        "etcd": lambda: _policy(vc, "etcd", {"matchLabels": vc.component_selector("etcd")}, [
            {"from": [{"podSelector": {"matchLabels": vc.component_selector("apiserver")}}],
             "ports": _tcp(2379)},
            # Members of a multi-member etcd talk to each other.
            {"from": [{"podSelector": {"matchLabels": vc.component_selector("etcd")}}],
             "ports": _tcp(2380)}]),
        "apiserver": lambda: _policy(vc, "apiserver", {"matchLabels": vc.component_selector("apiserver")}, [
            {"ports": _tcp(6443) + _tcp(8132)}]),
        "controllers": lambda: _policy(vc, "controllers", {
            "matchLabels": dict(vc.selector),
            "matchExpressions": [{"key": COMPONENT, "operator": "In", "values": ["controller-manager", "scheduler"]}],
        }, []),
    }
    return [built[name]() for name in which]
