# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A cluster's DNS (CoreDNS), built as data: its address, its Corefile and its API objects.

The address is the tenth of the service range, as kubeadm picks it. Kubelets (host and tenant) and the DNS
Service take it from here, so they cannot disagree. Every object is a dict; the Corefile is assembled from
checked values, so no setting can add a directive or a block.
"""

from __future__ import annotations

import ipaddress
import re

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.hosted_pods import container_resources
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.references import check_image

NAMESPACE = "kube-system"
NAME = "coredns"
APP_LABELS = {"k8s-app": "kube-dns"}  # the label kubectl, kubeadm and the host's own checks look for
SERVICE_NAME = "kube-dns"
DNS_PORT = 53
METRICS_PORT = 9153
HEALTH_PORT = 8080
READY_PORT = 8181
DOMAIN = r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$"
RESOLV_CONF = "/etc/resolv.conf"
DEFAULT_RESOURCES = {"requests": {"cpu": "50m", "memory": "70Mi"}, "limits": {"memory": "170Mi"}}


def dns_service_ip(service_cidr):
    """The cluster DNS address of a service range: its tenth address."""
    try:
        network = ipaddress.ip_network(str(service_cidr), strict=False)
    except ValueError:
        raise ValueError("service CIDR %r is not a network" % (service_cidr,)) from None
    if network.num_addresses < 16:
        raise ValueError("service CIDR %s is too small to hold the DNS address" % network)
    return str(network.network_address + 10)


def check_domain(value):
    value = str(value)
    if not re.match(DOMAIN, value):
        raise ValueError("cluster domain %r is not a DNS name (lower-case labels joined by dots)" % value)
    return value


def check_upstream(value):
    """An upstream resolver: an IP address, optionally with a port (IPv6 in brackets then), or the node's
    resolv.conf."""
    value = str(value)
    if value == RESOLV_CONF:
        return value
    match = re.match(r"^(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<host>[^:\[\]]+)):(?P<port>[0-9]{1,5})$", value)
    host, port = (match.group("v6") or match.group("host"), match.group("port")) if match else (value, None)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError("upstream resolver %r is neither an IP address (with an optional port) nor %s"
                         % (value, RESOLV_CONF)) from None
    if port is not None and not 0 < int(port) < 65536:
        raise ValueError("upstream resolver %r has a bad port" % value)
    return value


def corefile(cluster_domain, upstream=()):
    """The Corefile: the cluster domain (and reverse zones) from the API; other names forwarded upstream, or
    answered NXDOMAIN at once when there is no upstream, so a lookup fails cleanly instead of timing out."""
    domain = check_domain(cluster_domain)
    servers = [check_upstream(u) for u in upstream or ()]
    cluster = [
        "%s:%d in-addr.arpa:%d ip6.arpa:%d {" % (domain, DNS_PORT, DNS_PORT, DNS_PORT),
        "    errors",
        "    health {",
        "        lameduck 5s",
        "    }",
        "    ready",
        "    kubernetes %s in-addr.arpa ip6.arpa {" % domain,
        "        pods insecure",
        "        fallthrough in-addr.arpa ip6.arpa",
        "        ttl 30",
        "    }",
        "    prometheus :%d" % METRICS_PORT,
        "    cache 30",
        "    loadbalance",
        "    reload",
        "}",
    ]
    if servers:
        rest = ["    forward . %s" % " ".join(servers), "    cache 30", "    loop"]
    else:
        rest = ["    template ANY ANY {", "        rcode NXDOMAIN", "    }"]
    other = [".:%d {" % DNS_PORT, "    errors"] + rest + ["}"]
    return "\n".join(cluster + other) + "\n"


def replicas_for(nodes, wanted):
    """One replica per node up to `wanted`, at least one: replicas must fit the required anti-affinity."""
    return max(1, min(int(wanted), int(nodes)))


def manifests(service_cidr, image, cluster_domain="cluster.local", upstream=(),
              nodes=1, replicas=2, labels=None, resources=None):
    """Every object of the cluster's DNS, in the order they can be applied."""
    image = check_image(image)
    ip = dns_service_ip(service_cidr)
    count = replicas_for(nodes, replicas)
    labels = dict(labels or {}, **APP_LABELS)

    def meta(name, namespaced=True):
        out = {"name": name, "labels": dict(labels)}
        if namespaced:
            out["namespace"] = NAMESPACE
        return out

    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME)}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": meta("system:coredns", namespaced=False),
        "rules": [
            {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
             "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": meta("system:coredns", namespaced=False),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
    }
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(NAME),
              "data": {"Corefile": corefile(cluster_domain, upstream)}}
    pod_spec = {
        "serviceAccountName": NAME,
        "priorityClassName": "system-cluster-critical",
        "dnsPolicy": "Default",  # its own lookups go to the node's resolver, not to itself
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
        # Required, with replicas capped at the node count: a preferred rule lets every replica land on the
        # first node that joins a tenant and stay there when more nodes come.
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": dict(APP_LABELS)}, "topologyKey": "kubernetes.io/hostname"}]}},
        "containers": [{
            "name": NAME,
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "args": ["-conf", "/etc/coredns/Corefile"],
            "resources": container_resources(resources or DEFAULT_RESOURCES),
            "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}],
            "ports": [{"name": "dns", "containerPort": DNS_PORT, "protocol": "UDP"},
                      {"name": "dns-tcp", "containerPort": DNS_PORT, "protocol": "TCP"},
                      {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
                "readOnlyRootFilesystem": True,
            },
            "livenessProbe": {"httpGet": {"path": "/health", "port": HEALTH_PORT, "scheme": "HTTP"},
                              "initialDelaySeconds": 60, "timeoutSeconds": 5, "successThreshold": 1,
                              "failureThreshold": 5},
            # /ready is cheap; a new virtual cluster is Ready once its DNS is, so the kubelet looks every second.
            "readinessProbe": {"httpGet": {"path": "/ready", "port": READY_PORT, "scheme": "HTTP"},
                               "periodSeconds": 1},
        }],
        "volumes": [{"name": "config",
                     "configMap": {"name": NAME, "items": [{"key": "Corefile", "path": "Corefile"}]}}],
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(NAME),
        "spec": {
            "replicas": count,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "selector": {"matchLabels": dict(APP_LABELS)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        },
    }
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": dict(meta(SERVICE_NAME), annotations={
            "prometheus.io/port": str(METRICS_PORT), "prometheus.io/scrape": "true"}),
        "spec": {
            "selector": dict(APP_LABELS),
            "clusterIP": ip,
            "ports": [{"name": "dns", "port": DNS_PORT, "protocol": "UDP", "targetPort": DNS_PORT},
                      {"name": "dns-tcp", "port": DNS_PORT, "protocol": "TCP", "targetPort": DNS_PORT},
                      {"name": "metrics", "port": METRICS_PORT, "protocol": "TCP", "targetPort": METRICS_PORT}],
        },
    }
    # maxUnavailable, not minAvailable: with one replica a minAvailable of 1 would block every drain.
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta(NAME),
              "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(APP_LABELS)}}}
    return [account, role, binding, config, deployment, service, budget]
