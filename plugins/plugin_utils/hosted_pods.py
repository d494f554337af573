# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Pieces shared by the hosted control plane's workloads, built as data.

Every value lands in a field of its own; nothing is rendered to YAML text and parsed back, so no value can
add fields to a manifest whatever characters it holds.
"""

from __future__ import annotations

import copy

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.plain_data import to_plain
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import check_name

VC_KEYS = ("name", "namespace", "labels", "selector", "owner_references")


class VirtualClusterRef:
    """What every manifest of one virtual cluster carries: its names, labels and owner."""

    def __init__(self, vc):
        missing = [key for key in VC_KEYS if key not in (vc or {})]
        if missing:
            raise ValueError("the virtual cluster lacks %s" % ", ".join(missing))
        self.name = check_name("the virtual cluster's name", vc["name"])
        self.namespace = check_name("the virtual cluster's namespace", vc["namespace"],
                                    pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
        self.labels = dict(vc["labels"])
        self.selector = dict(vc["selector"])
        self.owner_references = to_plain(list(vc["owner_references"]))

    def component_labels(self, component):
        return dict(self.labels, **{"app.kubernetes.io/component": component})

    def component_selector(self, component):
        return dict(self.selector, **{"app.kubernetes.io/component": component})

    def metadata(self, name, component):
        return {"name": name, "namespace": self.namespace, "labels": self.component_labels(component),
                "ownerReferences": copy.deepcopy(self.owner_references)}


def placement(node_selector, tolerations):
    """Pod settings of every control-plane pod: where it runs, and no API credentials it does not need."""
    return {
        "nodeSelector": dict(node_selector or {}),
        "tolerations": to_plain(list(tolerations or [])),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }


def container_resources(value):
    """requests/limits as given, quantities as strings (the API's form)."""
    value = dict(value or {})
    unknown = set(value) - {"requests", "limits"}
    if unknown:
        raise ValueError("resources take requests and limits, not %s" % ", ".join(sorted(unknown)))
    return dict((kind, dict((str(k), str(v)) for k, v in (value.get(kind) or {}).items())) for kind in value)


def secret_volume(name, secret_name, keys):
    return {"name": name, "secret": {"secretName": secret_name, "items": [{"key": k, "path": k} for k in keys]}}


# A liveness probe ends a component that stopped answering. As kubeadm's control-plane pods do, it waits 15 s for
# each answer and restarts the component after eight failures in a row: on a host whose CPU is saturated, a 1 s
# timeout failed components that were only slow, and their restarts saturated the host further (make
# bench-tenants: tenants created at once on 2 cores went on restarting until the run gave up).
LIVENESS_TIMEOUT_S = 15
LIVENESS_FAILURES = 8


def liveness_probe(path, port, scheme="HTTP"):
    return http_probe(path, port, period=10, initial_delay=30, scheme=scheme, failure_threshold=LIVENESS_FAILURES,
                      timeout=LIVENESS_TIMEOUT_S)


def http_probe(path, port, period, initial_delay=0, scheme="HTTP", failure_threshold=None, timeout=None):
    probe = {"httpGet": {"path": path, "port": port, "scheme": scheme}, "periodSeconds": period}
    if timeout:
        probe["timeoutSeconds"] = timeout
    if initial_delay:
        probe["initialDelaySeconds"] = initial_delay
    if failure_threshold:
        probe["failureThreshold"] = failure_threshold
    return probe


def flags(binary, options):
    """A component's command: the binary and `--key=value` for each option, in order."""
    return [binary] + ["--%s=%s" % (key, value) for key, value in options]


REPLICA_COUNTS = (1, 2, 3)


def check_replicas(value, what="replicas"):
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or value not in REPLICA_COUNTS:
        raise ValueError("%s must be one of %s, not %r" % (what, ", ".join(map(str, REPLICA_COUNTS)), value))
    return value


def check_count(value, what):
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("%s must be a count, not %r" % (what, value))
    return value


def spreads(replicas, host_nodes):
    """Whether each replica gets a host node of its own: required anti-affinity needs as many nodes as
    replicas, or the ones left over would stay Pending."""
    return replicas <= host_nodes


def spread_affinity(vc, component, replicas, host_nodes):
    """Replicas of a component on different host nodes: required where there are enough nodes (one lost node
    costs one replica), preferred where not (they still run, as far apart as the nodes allow)."""
    term = {"topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": vc.component_selector(component)}}
    if spreads(replicas, host_nodes):
        return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": term}]}}


def disruption_budget(vc, component):
    """At most one pod of the component evicted at a time (a drain of host nodes waits for the next to be
    back): etcd keeps its quorum, several API servers keep one answering, and a single replica may still go.
    Pods that are not ready may always go, so a broken pod never blocks a drain."""
    name = "%s-%s" % (vc.name, component)
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": vc.metadata(name, component),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": vc.component_selector(component)},
                     "unhealthyPodEvictionPolicy": "AlwaysAllow"}}


def workload(kind, vc, name, component, pod_spec, replicas=1, extra_spec=None, pod_annotations=None):
    """A Deployment or StatefulSet of one control-plane component."""
    template_metadata = {"labels": vc.component_labels(component)}
    if pod_annotations:
        template_metadata["annotations"] = dict(pod_annotations)
    spec = {
        "replicas": replicas,
        "selector": {"matchLabels": vc.component_selector(component)},
        "template": {"metadata": template_metadata, "spec": pod_spec},
    }
    spec.update(extra_spec or {})
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": vc.metadata(name, component), "spec": spec}
